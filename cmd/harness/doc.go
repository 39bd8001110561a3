// Command harness runs pdsoak scenarios; see harness/cli for everything it does.
package main
