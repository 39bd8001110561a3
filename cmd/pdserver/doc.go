// Command pdserver runs the reference PD server's processes; see server/cli.
//
//	pdserver colocated --port 30000 --backend tinyref --seed 1
//	pdserver up --prefill 1 --decode 1 --port 30000
package main
