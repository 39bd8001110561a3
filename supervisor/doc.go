// Package supervisor runs one child process the way every part of pdsoak needs it run:
// the reference topology of `pdserver up` and the harness, the colocated reference
// server, and a scenario's target.launch commands.
//
//	p, err := supervisor.Start("decode-0", argv,
//		supervisor.WithLog(dir+"/decode-0.log"),      // stdout+stderr, appended across restarts
//		supervisor.WithEnv("KEY=value"),              // secrets go here, never into argv
//		supervisor.WithHealthURL(url+"/health"))
//	err = p.WaitHealthy(ctx)     // 200 within the health timeout, or the exit and the log's tail
//	p.Signal(syscall.SIGSTOP)    // to the whole process group
//	p.State()                    // from /proc: running, stopped, zombie, gone
//	err = p.Restart(ctx)         // same argv, same ports; rate-limited
//	err = p.Stop(ctx)            // SIGTERM (+SIGCONT), SIGKILL after the stop timeout; bounded reap (ErrNotReaped)
//
// Each run of the process is owned by one goroutine, its main loop:
//
//	lock the OS thread            // Pdeathsig fires when the forking *thread* ends
//	fork+exec in a new process group, Pdeathsig=SIGKILL
//	wait for the exit             // the thread stays locked, so it outlives the child
//	record the exit, close Exited(), call OnExit unless the exit was asked for
//
// So a child dies with the supervising process even when that one is SIGKILLed, and a
// signal to the group reaches whatever the child forked. Health checks back off
// exponentially (capped) on a golang.org/x/time/rate limiter; restarts are limited by
// another, so a fault timeline that restarts in a loop cannot fork-bomb the machine.
package supervisor
