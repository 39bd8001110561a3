//
//	pdserver colocated --port 30000 --backend tinyref --seed 1
//	pdserver up --prefill 1 --decode 1 --port 30000
// Command pdserver runs the reference PD server's processes; see server/cli.
package main
