package sim

import (
	"testing"
	"time"

	"pdsoak/scenarios"
	"pdsoak/server/gen"
)

// agents drives the topology directly like the incident's workload, without the harness
// half, so a topology test fails on the topology alone: n agents, each resending its growing conversation for
// `turns` turns, 500ms tool latency and 1s think time, 30s client deadline.
func agents(loop *Loop, srv Server, n, turns int) (done, failed, hung *int) {
	done, failed, hung = new(int), new(int), new(int)
	for i := 0; i < n; i++ {
		conv := prompt(32, i)
		var turn func(k int)
		turn = func(k int) {
			if k == turns {
				return
			}
			finished := false
			req := &gen.Request{ID: "a", Prompt: append([]int(nil), conv...), MaxTokens: 8, Deadline: loop.Now().Add(30 * time.Second)}
			cancel, err := srv.Submit(req, func(ev gen.Event) {
				conv = append(conv, ev.Tokens...)
				if ev.Done {
					finished = true
					if ev.Err != nil {
						*failed++
					} else {
						*done++
					}
					conv = append(conv, prompt(64, k)[1:]...) // the tool result
					loop.After(1500*time.Millisecond, func() { turn(k + 1) })
				}
			})
			if err != nil {
				*failed++
				loop.After(time.Second, func() { turn(k + 1) })
				return
			}
			loop.After(30*time.Second, func() {
				if !finished {
					*hung++
					cancel()
				}
			})
		}
		loop.At(Epoch.Add(time.Duration(i)*10*time.Millisecond), func() { turn(0) })
	}
	return done, failed, hung
}

func incident(b testing.TB) (*Loop, Server) { return load(b, "silent-drop-sglang") }

func load(b testing.TB, name string) (*Loop, Server) {
	sc, err := scenarios.Load(name)
	if err != nil {
		b.Fatal(err)
	}
	loop := NewLoop(Epoch)
	srv, err := NewTopology(loop, sc)
	if err != nil {
		b.Fatal(err)
	}
	return loop, srv
}

func TestIncidentWedgesUnderAgents(t *testing.T) {
	loop, srv := incident(t)
	done, failed, hung := agents(loop, srv, 30, 5)
	loop.RunUntil(Epoch.Add(25 * time.Second))
	stuck := 0
	for _, ri := range srv.Requests()["decode-0"] {
		if ri.Stage == "prealloc" {
			stuck++
		}
	}
	if stuck == 0 {
		t.Fatal("no request held in decode's prealloc queue")
	}
	loop.RunUntil(Epoch.Add(40 * time.Second))
	t.Logf("done %d failed %d hung %d events %d", *done, *failed, *hung, loop.Steps())
	if *hung == 0 {
		t.Fatal("the incident's wedge did not show: no request hung")
	}
	if *failed != 0 {
		t.Fatalf("%d requests failed: the wedge is silent", *failed)
	}
}

func TestIncidentStrictDoesNotHang(t *testing.T) {
	sc, err := scenarios.Load("silent-drop-strict")
	if err != nil {
		t.Fatal(err)
	}
	loop := NewLoop(Epoch)
	srv, err := NewTopology(loop, sc)
	if err != nil {
		t.Fatal(err)
	}
	done, failed, hung := agents(loop, srv, 30, 5)
	loop.RunUntil(Epoch.Add(40 * time.Second))
	t.Logf("done %d failed %d hung %d events %d", *done, *failed, *hung, loop.Steps())
	if *hung != 0 {
		t.Fatalf("%d requests hung under strict semantics", *hung)
	}
}
