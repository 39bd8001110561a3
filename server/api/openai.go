package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// CompletionRequest is the body of POST /v1/completions. Unknown fields are ignored, as
// OpenAI does; known fields with the wrong JSON type are a 400 naming the field.
type CompletionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	N             *int            `json:"n"`
	Stream        bool            `json:"stream"`
	StreamOptions *StreamOptions  `json:"stream_options"`
	Stop          json.RawMessage `json:"stop"`
	Seed          *int64          `json:"seed"`
	Echo          bool            `json:"echo"`
	// IgnoreEOS is SGLang's extension: generate exactly max_tokens tokens.
	IgnoreEOS bool `json:"ignore_eos"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []ChatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	IgnoreEOS           bool            `json:"ignore_eos"`
}

// StreamOptions is stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one message. Content is a string, null, or a list of
// {"type":"text","text":...} parts.
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

// chatRoles are the roles the template accepts.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// ChatTemplate renders messages as the prompt text of the reference model:
//
//	<|system|>\n{content}\n<|user|>\n{content}\n ... <|assistant|>\n
//
// one block per message in order, each "<|" + role + "|>\n" + content + "\n", followed by
// the assistant header the model continues from. The tokenizer then prepends BOS.
func ChatTemplate(roles, contents []string) string {
	var b strings.Builder
	for i := range roles {
		b.WriteString("<|")
		b.WriteString(roles[i])
		b.WriteString("|>\n")
		b.WriteString(contents[i])
		b.WriteString("\n")
	}
	b.WriteString("<|assistant|>\n")
	return b.String()
}

// job is a parsed, validated OpenAI request ready to be generated.
type job struct {
	chat         bool
	req          gen.Request
	stop         []string
	stream       bool
	includeUsage bool
}

// decode unmarshals body into v, turning JSON errors into 400s that name the field.
func decode(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "request body is empty")
	}
	if !utf8.Valid(body) {
		return invalid("", "request body is not valid UTF-8")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return typeError(te, "")
		}
		return invalid("", fmt.Sprintf("malformed JSON: %v", err))
	}
	return nil
}

// typeError is the 400 of a JSON value of the wrong type for its field, named under
// prefix (the path of the value decoded, "" for the body).
func typeError(te *json.UnmarshalTypeError, prefix string) *apiError {
	field := te.Field
	if prefix != "" && field != "" {
		field = prefix + "." + field
	} else if prefix != "" {
		field = prefix
	}
	if field == "" {
		return invalid("", fmt.Sprintf("request body must be a JSON object, not %s", te.Value))
	}
	if num, ok := strings.CutPrefix(te.Value, "number "); ok && jsonType(te.Type.Kind().String()) == "number" {
		// The right JSON type, a value the field cannot hold: a fraction for an
		// integer, or out of range.
		what := "a number in range"
		if k := te.Type.Kind().String(); strings.HasPrefix(k, "int") || strings.HasPrefix(k, "uint") {
			what = "an integer in range"
		}
		return invalid(field, fmt.Sprintf("field %q must be %s (got %s)", field, what, num))
	}
	return invalid(field, fmt.Sprintf("field %q must be of JSON type %s, not %s", field, jsonType(te.Type.Kind().String()), te.Value))
}

// messageTypeError names the message a type error under messages is in: encoding/json
// names the field (messages.role), not which message holds it.
func messageTypeError(body []byte, e *apiError) *apiError {
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return e // messages itself has the wrong type
	}
	for i, m := range raw.Messages {
		var cm ChatMessage
		var te *json.UnmarshalTypeError
		if err := json.Unmarshal(m, &cm); errors.As(err, &te) {
			return typeError(te, fmt.Sprintf("messages[%d]", i))
		}
	}
	return e
}

func jsonType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "bool":
		return "boolean"
	case kind == "slice", kind == "array":
		return "array"
	case kind == "struct", kind == "map":
		return "object"
	}
	return kind
}

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// parseStop reads stop: a string or a list of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	var list []string
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("stop", "stop must be a string or a list of strings")
	}
	if len(list) > MaxStopStrings {
		return nil, invalid("stop", fmt.Sprintf("stop has %d entries; at most %d are allowed", len(list), MaxStopStrings))
	}
	out := list[:0]
	for _, s := range list {
		if s == "" {
			return nil, invalid("stop", "stop strings must not be empty")
		}
		if len(s) > MaxStopLen {
			return nil, invalid("stop", fmt.Sprintf("stop strings must be at most %d bytes", MaxStopLen))
		}
		out = append(out, s)
	}
	return out, nil
}

// common holds the fields shared by both endpoints.
type common struct {
	model        string
	maxTokens    *int
	maxParam     string
	temperature  *float64
	topP         *float64
	n            *int
	seed         *int64
	stop         json.RawMessage
	stream       bool
	streamOpts   *StreamOptions
	ignoreEOS    bool
	defaultLimit int
	promptParam  string
}

// build validates the shared fields against the tokenized prompt and fills a job.
func (h *Handler) build(c common, prompt []int, chat bool) (*job, *apiError) {
	if c.model != "" && c.model != h.model {
		return nil, &apiError{status: 404, kind: gen.ErrorKind(gen.ErrInvalid), code: "model_not_found", param: "model",
			msg: fmt.Sprintf("the model %q does not exist; this server serves %q", c.model, h.model)}
	}
	if c.n != nil && *c.n != 1 {
		return nil, invalid("n", fmt.Sprintf("n must be 1 (got %d)", *c.n))
	}
	j := &job{chat: chat, stream: c.stream}
	if c.streamOpts != nil {
		if !c.stream && c.streamOpts.IncludeUsage {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true")
		}
		j.includeUsage = c.streamOpts.IncludeUsage
	}
	temp := 1.0
	if c.temperature != nil {
		temp = *c.temperature
		if math.IsNaN(temp) || temp < 0 || temp > 2 {
			return nil, invalid("temperature", fmt.Sprintf("temperature must be in [0, 2] (got %v)", temp))
		}
	}
	topP := 1.0
	if c.topP != nil {
		topP = *c.topP
		if math.IsNaN(topP) || topP < 0 || topP > 1 {
			return nil, invalid("top_p", fmt.Sprintf("top_p must be in [0, 1] (got %v)", topP))
		}
		if topP == 0 { // the limit of nucleus sampling: the single most likely token
			temp = 0
		}
	}
	var err *apiError
	if j.stop, err = parseStop(c.stop); err != nil {
		return nil, err
	}
	var seed uint64
	if c.seed != nil {
		seed = uint64(*c.seed)
	} else if temp > 0 {
		seed = h.seed()
	}

	limit := h.contextLen
	if limit <= 0 {
		limit = AbsurdMaxTokens
	}
	if len(prompt) >= limit {
		return nil, tooLong(c.promptParam, fmt.Sprintf("the prompt is %d tokens; the context length is %d", len(prompt), limit))
	}
	maxTokens := 0
	if c.maxTokens != nil {
		maxTokens = *c.maxTokens
		if maxTokens <= 0 {
			return nil, invalid(c.maxParam, fmt.Sprintf("%s must be at least 1 (got %d)", c.maxParam, maxTokens))
		}
		if maxTokens > limit {
			return nil, invalid(c.maxParam, fmt.Sprintf("%s is %d; the context length is %d", c.maxParam, maxTokens, limit))
		}
		if len(prompt)+maxTokens > limit {
			return nil, tooLong(c.maxParam, fmt.Sprintf("the prompt (%d tokens) plus %s (%d) exceeds the context length %d",
				len(prompt), c.maxParam, maxTokens, limit))
		}
	} else {
		maxTokens = min(c.defaultLimit, limit-len(prompt))
	}
	j.req = gen.Request{
		Prompt:    prompt,
		MaxTokens: maxTokens,
		Sampling:  kernels.Sampling{Temperature: temp, TopP: topP, Seed: seed},
		IgnoreEOS: c.ignoreEOS,
	}
	return j, nil
}

// parseCompletion parses and validates a /v1/completions body.
func (h *Handler) parseCompletion(body []byte) (*job, *apiError) {
	var cr CompletionRequest
	if err := decode(body, &cr); err != nil {
		return nil, err
	}
	if cr.Echo {
		return nil, invalid("echo", "echo is not supported")
	}
	prompt, err := h.parsePrompt(cr.Prompt)
	if err != nil {
		return nil, err
	}
	return h.build(common{model: cr.Model, maxTokens: cr.MaxTokens, maxParam: "max_tokens",
		temperature: cr.Temperature, topP: cr.TopP, n: cr.N, seed: cr.Seed, stop: cr.Stop,
		stream: cr.Stream, streamOpts: cr.StreamOptions, ignoreEOS: cr.IgnoreEOS,
		defaultLimit: DefaultCompletionMaxTokens, promptParam: "prompt"}, prompt, false)
}

// parsePrompt accepts a string, a list holding one string, or a list of token ids.
func (h *Handler) parsePrompt(raw json.RawMessage) ([]int, *apiError) {
	if isNull(raw) {
		return nil, invalid("prompt", "prompt is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return nil, invalid("prompt", "prompt must not be empty")
		}
		return h.tok.EncodeWithBOS(s), nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		if len(list) != 1 {
			return nil, invalid("prompt", fmt.Sprintf("prompt must hold exactly one string (got %d); batched prompts are not supported", len(list)))
		}
		if list[0] == "" {
			return nil, invalid("prompt", "prompt must not be empty")
		}
		return h.tok.EncodeWithBOS(list[0]), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		if len(ids) == 0 {
			return nil, invalid("prompt", "prompt must not be empty")
		}
		if err := h.checkIDs("prompt", ids); err != nil {
			return nil, err
		}
		bos := h.tok.EncodeWithBOS("")
		if len(bos) == 1 && ids[0] != bos[0] {
			ids = append(bos, ids...)
		}
		return ids, nil
	}
	return nil, invalid("prompt", "prompt must be a string, a list of one string, or a list of token ids")
}

// checkIDs rejects negative ids and, when the vocabulary size is known, ids beyond it.
func (h *Handler) checkIDs(param string, ids []int) *apiError {
	for _, id := range ids {
		if id < 0 || (h.vocab > 0 && id >= h.vocab) {
			return invalid(param, fmt.Sprintf("token id %d is out of range", id))
		}
	}
	return nil
}

// parseChat parses and validates a /v1/chat/completions body and applies ChatTemplate.
func (h *Handler) parseChat(body []byte) (*job, *apiError) {
	var cr ChatRequest
	if err := decode(body, &cr); err != nil {
		if strings.HasPrefix(err.param, "messages.") || err.param == "messages" {
			err = messageTypeError(body, err)
		}
		return nil, err
	}
	if len(cr.Messages) == 0 {
		return nil, invalid("messages", "messages must not be empty")
	}
	roles := make([]string, len(cr.Messages))
	contents := make([]string, len(cr.Messages))
	for i, m := range cr.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		if !chatRoles[m.Role] {
			return nil, invalid(param+".role", fmt.Sprintf("unknown role %q", m.Role))
		}
		text, err := messageText(m.Content)
		if err != nil {
			return nil, invalid(param+".content", err.Error())
		}
		roles[i], contents[i] = m.Role, text
	}
	if strings.TrimSpace(strings.Join(contents, "")) == "" {
		return nil, invalid("messages", "messages must have some content")
	}
	max, param := cr.MaxTokens, "max_tokens"
	if cr.MaxCompletionTokens != nil {
		max, param = cr.MaxCompletionTokens, "max_completion_tokens"
	}
	prompt := h.tok.EncodeWithBOS(ChatTemplate(roles, contents))
	return h.build(common{model: cr.Model, maxTokens: max, maxParam: param,
		temperature: cr.Temperature, topP: cr.TopP, n: cr.N, seed: cr.Seed, stop: cr.Stop,
		stream: cr.Stream, streamOpts: cr.StreamOptions, ignoreEOS: cr.IgnoreEOS,
		defaultLimit: DefaultChatMaxTokens, promptParam: "messages"}, prompt, true)
}

// messageText reads a message content: a string, null, or text parts.
func messageText(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("content part of type %q is not supported (only text)", p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// Parsed is an OpenAI request as the endpoints make it before they generate: the
// gen.Request (ID and Deadline unset: the endpoint sets them on arrival, see
// RequestTimeout) and the shape of the answer.
type Parsed struct {
	Request                    gen.Request
	Chat, Stream, IncludeUsage bool
	Stop                       []string
}

// ParseOpenAI parses and validates a body of POST path (/v1/completions or
// /v1/chat/completions) exactly as that endpoint does; a refusal is the error answer it
// would send. The simulator turns its requests into gen.Requests with it.
func (h *Handler) ParseOpenAI(path string, body []byte) (*Parsed, *Refusal) {
	var j *job
	var e *apiError
	switch path {
	case "/v1/completions":
		j, e = h.parseCompletion(body)
	case "/v1/chat/completions":
		j, e = h.parseChat(body)
	default:
		e = &apiError{status: 404, kind: "invalid_request", code: "not_found", msg: fmt.Sprintf("no route for %s", path)}
	}
	if e != nil {
		return nil, e.refusal()
	}
	return &Parsed{Request: j.req, Chat: j.chat, Stream: j.stream, IncludeUsage: j.includeUsage, Stop: j.stop}, nil
}

// RequestTimeout is the bound the endpoints put on every generation (0: none), from
// arrival: see StampDeadline.
func (h *Handler) RequestTimeout() time.Duration { return h.reqTimeout }

// StampDeadline applies the handler's --request-timeout (StampDeadline) to a request
// that arrived at arrival.
func (h *Handler) StampDeadline(req *gen.Request, arrival time.Time) {
	StampDeadline(req, arrival, h.reqTimeout)
}

// StampDeadline is the --request-timeout rule every endpoint applies when a request
// arrives (the simulated router too, at its clock's arrival): a request that carries no
// deadline of its own gets arrival + timeout; with no timeout it stays unbounded.
func StampDeadline(req *gen.Request, arrival time.Time, timeout time.Duration) {
	if req.Deadline.IsZero() && timeout > 0 {
		req.Deadline = arrival.Add(timeout)
	}
}

// Model is the model id the handler serves (and names in its answers).
func (h *Handler) Model() string { return h.model }

// NewStreamDecoder is the decoder the endpoints turn generated ids into text with.
func (h *Handler) NewStreamDecoder() *kernels.StreamDecoder { return h.tok.NewStreamDecoder() }
