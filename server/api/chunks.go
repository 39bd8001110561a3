package api

// Chunks builds the chunks and bodies of one OpenAI answer as the endpoints write them:
// the endpoints' writer (openaiOut) and the simulator's front end (pdsoak/sim) both
// build them here, so an answer has one shape.
type Chunks struct {
	ID, Model string
	Created   int64
	Chat      bool
}

// Role is a chat stream's first chunk: the assistant's role and empty content.
func (c Chunks) Role() ChatResponse {
	empty := ""
	return c.chat(&ChatDelta{Role: "assistant", Content: &empty}, nil)
}

func (c Chunks) chat(d *ChatDelta, finish *string) ChatResponse {
	return ChatResponse{ID: c.ID, Object: "chat.completion.chunk", Created: c.Created, Model: c.Model,
		Choices: []ChatChoice{{Delta: d, FinishReason: finish}}}
}

func (c Chunks) completion(ch []CompletionChoice, u *Usage) CompletionResponse {
	return CompletionResponse{ID: c.ID, Object: "text_completion", Created: c.Created, Model: c.Model, Choices: ch, Usage: u}
}

// Content is a stream chunk of generated text s (not empty).
func (c Chunks) Content(s string) any {
	if c.Chat {
		return c.chat(&ChatDelta{Content: &s}, nil)
	}
	return c.completion([]CompletionChoice{{Text: s}}, nil)
}

// Finish is the stream chunk that carries the finish reason.
func (c Chunks) Finish(reason string) any {
	if c.Chat {
		return c.chat(&ChatDelta{}, &reason)
	}
	return c.completion([]CompletionChoice{{FinishReason: &reason}}, nil)
}

// Usage is the stream's usage chunk (stream_options.include_usage): no choices.
func (c Chunks) Usage(u Usage) any {
	if c.Chat {
		return ChatResponse{ID: c.ID, Object: "chat.completion.chunk", Created: c.Created, Model: c.Model,
			Choices: []ChatChoice{}, Usage: &u}
	}
	return c.completion([]CompletionChoice{}, &u)
}

// Whole is a non-stream answer's body: text, its finish reason and usage.
func (c Chunks) Whole(text, reason string, u Usage) any {
	if c.Chat {
		return ChatResponse{ID: c.ID, Object: "chat.completion", Created: c.Created, Model: c.Model,
			Choices: []ChatChoice{{Message: &ChatContent{Role: "assistant", Content: text}, FinishReason: &reason}}, Usage: &u}
	}
	return c.completion([]CompletionChoice{{Text: text, FinishReason: &reason}}, &u)
}

// ID is the id of the answer to request id: chatcmpl-… for chat, cmpl-… otherwise.
func ID(chat bool, id string) string {
	if chat {
		return "chatcmpl-" + id
	}
	return "cmpl-" + id
}
