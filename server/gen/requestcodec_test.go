package gen

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// agreeRequest checks FastWorkerRequest against json.Unmarshal on in: whatever the fast
// path accepts, encoding/json accepts and decodes to the same value.
func agreeRequest(t *testing.T, in string) (fast bool) {
	t.Helper()
	got, ok := FastWorkerRequest([]byte(in))
	if !ok {
		return false
	}
	var want WorkerRequest
	require.NoError(t, json.Unmarshal([]byte(in), &want), "the fast path accepted what encoding/json refuses")
	require.Equal(t, want, got)
	return true
}

func TestFastWorkerRequest(t *testing.T) {
	room := uint64(1<<64 - 1)
	leg := WorkerRequest{RID: "r-1", InputIDs: []int{256, 104, 105}, BootstrapRoom: &room, BootstrapAddr: "127.0.0.1:8998",
		DeadlineUnixMs: 1796232141333, SamplingParams: WorkerSampling{MaxNewTokens: 8, Temperature: 0.7, TopP: 0.95, Seed: 1<<64 - 1, IgnoreEOS: true}}
	zero := uint64(0)
	for _, tc := range []struct {
		name string
		wr   WorkerRequest
	}{
		{"a PD leg", leg},
		{"room zero", WorkerRequest{RID: "x", InputIDs: []int{1}, BootstrapRoom: &zero}},
		{"decode only", WorkerRequest{RID: "x", InputIDs: []int{-1, 0}, DecodeOnly: true, SamplingParams: WorkerSampling{MaxNewTokens: 1}}},
		{"tiny and huge floats", WorkerRequest{InputIDs: []int{7}, SamplingParams: WorkerSampling{Temperature: 1e-9, TopP: 1e21}}},
		{"empty ids", WorkerRequest{InputIDs: []int{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := AppendWorkerRequest(nil, &tc.wr)
			require.NoError(t, err)
			require.True(t, agreeRequest(t, string(b)), "the router's own encoding must take the fast path: %s", b)
		})
	}
	// Everything else is declined (encoding/json decides) or, when accepted, agrees.
	for _, in := range []string{
		``, `{}`, `{"rid":"a","rid":"b"}`, `{"RID":"a"}`, `{"rid":"\u0041"}`, `{"rid":"é"}`, `{ "rid":"a"}`, `{"rid":"a"} `,
		`{"input_ids":null}`, `{"input_ids":[1.0]}`, `{"input_ids":[01]}`, `{"bootstrap_room":-1}`, `{"bootstrap_room":18446744073709551616}`,
		`{"bootstrap_room":1e3}`, `{"bootstrap_room":null}`, `{"sampling_params":{"temperature":1e400}}`,
		`{"sampling_params":{"temperature":1e-400}}`, `{"sampling_params":{"temperature":-0}}`, `{"sampling_params":{"temperature":.5}}`,
		`{"sampling_params":{"temperature":1.}}`, `{"sampling_params":{"temperature":1.5E+2}}`, `{"sampling_params":{"temperature":01}}`,
		`{"sampling_params":{"seed":1,"seed":2}}`, `{"sampling_params":{"top_k":1}}`, `{"sampling_params":{}}`, `{"decode_only":1}`,
		`{"deadline_unix_ms":99999999999999999999}`, `{"extra":1}`, `{"rid":"a",}`, `{"rid":"a"}x`, `[]`, `{`,
	} {
		t.Run(in, func(t *testing.T) { agreeRequest(t, in) })
	}
}

func FuzzFastWorkerRequest(f *testing.F) {
	f.Add(`{"rid":"r","input_ids":[1,2],"sampling_params":{"max_new_tokens":8,"temperature":0.7,"top_p":0.9,"seed":3,"ignore_eos":true},"bootstrap_room":5,"bootstrap_addr":"a:1","deadline_unix_ms":7}`,
		"r", []byte{1, 2}, 8, 0.7, 0.9, uint64(3), true, true, uint64(5), "a:1", int64(7), false)
	f.Add(`{"sampling_params":{"temperature":1e-400}}`, "", []byte(nil), 0, 1e-7, 1e22, uint64(0), false, false, uint64(0), "", int64(0), true)
	f.Fuzz(func(t *testing.T, in, rid string, ids []byte, maxNew int, temp, topP float64, seed uint64, eos, hasRoom bool,
		room uint64, addr string, deadline int64, decodeOnly bool) {
		agreeRequest(t, in)
		wr := WorkerRequest{RID: rid, BootstrapAddr: addr, DeadlineUnixMs: deadline, DecodeOnly: decodeOnly,
			SamplingParams: WorkerSampling{MaxNewTokens: maxNew, Temperature: temp, TopP: topP, Seed: seed, IgnoreEOS: eos}}
		for i, b := range ids {
			wr.InputIDs = append(wr.InputIDs, int(b)*(i-2)*7919)
		}
		if hasRoom {
			wr.BootstrapRoom = &room
		}
		if b, err := AppendWorkerRequest(nil, &wr); err == nil {
			agreeRequest(t, string(b))
		}
	})
}
