package api

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"pdsoak/server/gen"
)

// TestOpenAIClientSeesFailures: the official client must report a failure, never a
// short success, for a refusal and for an error after the stream started.
func TestOpenAIClientSeesFailures(t *testing.T) {
	f := &fakeGen{script: func(e *emitter) {
		if e.send(gen.Event{Tokens: []int{'h', 'i'}}) {
			e.send(gen.Event{Done: true, Err: &gen.StageError{Stage: "running", Err: gen.ErrTimeout}})
		}
	}}
	srv, _ := startServer(t, f)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{Model: "ref", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}

	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var text string
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			text += ch.Choices[0].Delta.Content
		}
	}
	var se *ssestream.StreamError
	if err := stream.Err(); !errors.As(err, &se) {
		t.Fatalf("stream error %v (text %q), want a StreamError", err, text)
	}
	if text != "hi" {
		t.Errorf("tokens before the error: %q", text)
	}

	_, err := c.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 504 {
		t.Fatalf("non-stream error %v, want a 504 openai.Error", err)
	}

	f.set(func() { f.refuse = &gen.OverloadError{RetryAfter: time.Second, Reason: "queue full"} })
	_, err = c.Chat.Completions.New(ctx, params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Type != "overloaded" {
		t.Fatalf("refusal %v, want 503 overloaded", err)
	}
}
