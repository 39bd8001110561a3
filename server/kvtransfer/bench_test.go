package kvtransfer

import (
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
)

// rawCopy moves n bytes over a fresh loopback TCP connection with plain Go I/O: the
// baseline the transfer is compared against.
func rawCopy(b *testing.B, src []byte, dst []byte) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_, err = io.ReadFull(c, dst)
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(b, err)
	defer c.Close()
	start := time.Now()
	if _, err := c.Write(src); err != nil {
		b.Fatal(err)
	}
	require.NoError(b, <-done)
	return time.Since(start)
}

// BenchmarkTransfer sends one 8 MiB room (64 pages × 8 layers of 16 KiB frames) per
// iteration and, right before it, copies the same number of bytes over raw loopback TCP
// (plain Go I/O, a fresh connection). kv/raw is the median over iterations of raw time ÷
// KV time: each pair is measured back to back, so a burst of load on a shared machine
// skews one pair, not the figure. kv/raw_total is the same ratio of the summed times, and
// kv_GB/s and raw_GB/s the summed rates. kv/raw_cpu is the ratio of the CPU time (user and
// system, the whole process) each side took: what the transfer costs beyond the copy,
// whatever else the machine runs.
func BenchmarkTransfer(b *testing.B) {
	const pages, pageSize, layers, bpt = 64, 16, 8, 1024
	src, _ := kernels.NewKVStore(pages, pageSize, layers, bpt)
	dst, _ := kernels.NewKVStore(pages, pageSize, layers, bpt)
	all := make([]int32, pages)
	for i := range all {
		all[i] = int32(i)
	}
	fill(src, all, 1)
	total := pages * pageSize * layers * bpt
	raw, rawDst := make([]byte, total), make([]byte, total)
	s := NewSender(src, WithHook(nil), WithLogger(nil))
	require.NoError(b, s.Listen("127.0.0.1:0"))
	defer s.Close()
	r := NewReceiver(dst, WithHook(nil), WithLogger(nil))
	defer r.Close()
	var rawT, kvT, rawCPU, kvCPU time.Duration
	ratios := make([]float64, 0, b.N)
	b.SetBytes(int64(total))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0 := cpuTime()
		rt := rawCopy(b, raw, rawDst)
		c1 := cpuTime()
		start := time.Now()
		room := uint64(i + 1)
		tr, err := r.Start(context.Background(), s.Addr(), room, all, pages*pageSize)
		require.NoError(b, err)
		require.NoError(b, s.Send(context.Background(), room, all, pages*pageSize, 1))
		if res := <-tr.Done(); res.Err != nil {
			b.Fatal(res.Err)
		}
		kt := time.Since(start)
		rawCPU, kvCPU = rawCPU+c1-c0, kvCPU+cpuTime()-c1
		rawT, kvT = rawT+rt, kvT+kt
		ratios = append(ratios, rt.Seconds()/kt.Seconds())
	}
	b.StopTimer()
	if !bytes.Equal(src.LayerBytes(int32(pages-1), layers-1), dst.LayerBytes(int32(pages-1), layers-1)) {
		b.Fatal("the last page arrived different")
	}
	slices.Sort(ratios)
	gb := float64(total) * float64(b.N) / 1e9
	b.ReportMetric(gb/kvT.Seconds(), "kv_GB/s")
	b.ReportMetric(gb/rawT.Seconds(), "raw_GB/s")
	b.ReportMetric(ratios[len(ratios)/2], "kv/raw")
	b.ReportMetric(rawT.Seconds()/kvT.Seconds(), "kv/raw_total")
	b.ReportMetric(rawCPU.Seconds()/kvCPU.Seconds(), "kv/raw_cpu")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
