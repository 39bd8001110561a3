package scenarios

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mapEnv(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestExpand(t *testing.T) {
	env := mapEnv(map[string]string{"MODEL": "/m/llama", "EMPTY": "", "PORT": "30001"})
	tests := []struct {
		name, in, want, err string
	}{
		{name: "no reference", in: "plain text", want: "plain text"},
		{name: "set", in: "--model-path ${MODEL}", want: "--model-path /m/llama"},
		{name: "default unused", in: "${PORT:-30000}", want: "30001"},
		{name: "default used when unset", in: "${GPU:-0}", want: "0"},
		{name: "default used when empty", in: "${EMPTY:-x}", want: "x"},
		{name: "set but empty without default", in: "a${EMPTY}b", want: "ab"},
		{name: "empty default", in: "${GPU:-}", want: ""},
		{name: "default with spaces", in: "${SERVER:-python3 -m sglang.launch_server}", want: "python3 -m sglang.launch_server"},
		{name: "dollar escape", in: "$${MODEL} costs $$5", want: "${MODEL} costs $5"},
		{name: "bare dollar kept", in: "$HOME and $ and $1", want: "$HOME and $ and $1"},
		{name: "trailing dollar", in: "x$", want: "x$"},
		{name: "two references", in: "http://127.0.0.1:${PORT}/${MODEL}", want: "http://127.0.0.1:30001//m/llama"},
		{name: "unset", in: "${MODEL_PATH}", err: "environment variable MODEL_PATH is not set"},
		{name: "unterminated", in: "${MODEL", err: "unterminated ${"},
		{name: "bad name", in: "${1X}", err: "not a variable name"},
		{name: "empty name", in: "${:-x}", err: "not a variable name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Expand(tc.in, env, nil)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestExpandRecordsVariables(t *testing.T) {
	var used []EnvVar
	_, err := Expand("${A} ${B:-2}", mapEnv(map[string]string{"A": "1"}), func(e EnvVar) { used = append(used, e) })
	require.NoError(t, err)
	assert.Equal(t, []EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2", Default: true}}, used)
}

const envScenario = `name: env
duration: ${DURATION:-5s}
target:
  url: http://127.0.0.1:${PORT:-30000}
  launch:
    - name: colocated
      role: colocated
      command: [pdserver, colocated, --port, "${PORT:-30000}", --model-path, "${MODEL_PATH}"]
      health_url: http://127.0.0.1:${PORT:-30000}/health
workloads:
  - type: burst
    count: ${COUNT:-3}
    stream: ${STREAM:-true}
    prompt_tokens: '${QUOTED:-7}'
`

func TestParseExpandsEnvironment(t *testing.T) {
	t.Run("expanded scalars are re-typed", func(t *testing.T) {
		sc, err := Parse("env.yaml", []byte(envScenario), WithEnv(mapEnv(map[string]string{"MODEL_PATH": "/models/x", "COUNT": "9"})))
		require.NoError(t, err)
		assert.Equal(t, 7, sc.Workloads[0].PromptTokens, "a quoted reference is re-typed too")
		assert.Equal(t, "http://127.0.0.1:30000", sc.Target.URL)
		assert.Equal(t, []string{"pdserver", "colocated", "--port", "30000", "--model-path", "/models/x"}, sc.Target.Launch[0].Command)
		assert.Equal(t, 9, sc.Workloads[0].Count)
		assert.True(t, sc.Workloads[0].Stream)
		assert.Equal(t, "5s", sc.Duration.String())
		names := []string{}
		for _, e := range sc.Env {
			names = append(names, e.Name)
		}
		assert.Equal(t, []string{"DURATION", "PORT", "MODEL_PATH", "COUNT", "STREAM", "QUOTED"}, names)
		var b strings.Builder
		require.NoError(t, Plan(sc).Write(&b))
		assert.Contains(t, b.String(), "env       MODEL_PATH=/models/x\n")
		assert.Contains(t, b.String(), "env       PORT=30000 (default)\n")
		assert.Contains(t, b.String(), "launch    colocated (colocated): pdserver colocated --port 30000 --model-path /models/x\n")
	})
	t.Run("unset variable is a located problem", func(t *testing.T) {
		_, err := Parse("env.yaml", []byte(envScenario), WithEnv(mapEnv(nil)))
		var ps Problems
		require.ErrorAs(t, err, &ps)
		require.Len(t, ps, 1)
		assert.Equal(t, 8, ps[0].Line)
		assert.Contains(t, ps[0].String(), "env.yaml:8: environment variable MODEL_PATH is not set")
	})
	t.Run("an explicit string tag stays a string", func(t *testing.T) {
		data := strings.Replace(envScenario, "'${QUOTED:-7}'", "!!str '${QUOTED:-7}'", 1)
		_, err := Parse("env.yaml", []byte(data), WithEnv(mapEnv(map[string]string{"MODEL_PATH": "/m"})))
		var ps Problems
		require.ErrorAs(t, err, &ps)
		assert.Equal(t, "workloads[0].prompt_tokens", ps[0].Path)
		assert.Equal(t, 14, ps[0].Line)
	})
	t.Run("keys are not expanded", func(t *testing.T) {
		_, err := Parse("env.yaml", []byte("name: x\n${KEY:-name2}: y\nworkloads: [{type: burst, count: 1}]\n"), WithEnv(mapEnv(nil)))
		var ps Problems
		require.ErrorAs(t, err, &ps)
		assert.Contains(t, ps[0].Msg, "unknown field")
	})
	t.Run("an anchor is expanded once", func(t *testing.T) {
		data := "name: x\ndescription: &d '$$${A:-1}'\nworkloads: [{type: burst, count: 1, name: w}]\nfaults: [{type: kill, target: w, at: 1s, params: {note: *d}}]\n"
		sc, err := DecodeEnv("x.yaml", []byte(data), mapEnv(nil))
		require.NoError(t, err)
		assert.Equal(t, "$1", sc.Description)
		assert.Equal(t, "$1", sc.Faults[0].Params["note"])
	})
}

// FuzzExpand checks the expander never panics, that a string without ${ or $$ comes
// back unchanged, and that every escaped $$ becomes one $.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "${A}", "${A:-b}", "$$", "$${A}", "${", "${A:-}", "$x", "${A:-${B}}", "}${A"} {
		f.Add(s)
	}
	env := mapEnv(map[string]string{"A": "va", "B": ""})
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Expand(s, env, nil)
		if !strings.Contains(s, "${") && !strings.Contains(s, "$$") {
			require.NoError(t, err)
			require.Equal(t, s, got)
		}
		if err == nil && !strings.Contains(s, "${") {
			require.Equal(t, strings.Count(s, "$")-strings.Count(s, "$$"), strings.Count(got, "$"))
		}
	})
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		err      bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "blanks", in: "  \t ", want: nil},
		{name: "words", in: "python3 -m sglang.launch_server", want: []string{"python3", "-m", "sglang.launch_server"}},
		{name: "single quotes", in: `bin/pdserver 'sglang server' x`, want: []string{"bin/pdserver", "sglang server", "x"}},
		{name: "double quotes and escapes", in: `a "b \"c\" $d" e\ f`, want: []string{"a", `b "c" $d`, "e f"}},
		{name: "empty quoted word", in: `a '' b`, want: []string{"a", "", "b"}},
		{name: "json argument", in: `--kv-transfer-config '{"kv_connector":"NixlConnector"}'`, want: []string{"--kv-transfer-config", `{"kv_connector":"NixlConnector"}`}},
		{name: "unterminated single", in: `a 'b`, err: true},
		{name: "unterminated double", in: `a "b`, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SplitWords(tc.in)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzSplitWords checks the splitter never panics and that words joined back with
// shellJoin split into the same words.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"", "a b", `'x y' "z"`, `a\ b`, `"a\"b"`, `'`, `"`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitWords(s)
		if err != nil {
			return
		}
		again, err := SplitWords(shellJoin(words))
		require.NoError(t, err)
		if len(words) == 0 {
			require.Empty(t, again)
			return
		}
		require.Equal(t, words, again)
	})
}

func TestValidateLaunchLinksAndMetrics(t *testing.T) {
	base := `name: x
target:
  url: %s
  metrics_urls: %s
  links: %s
  launch:
    - name: router
      role: router
      launcher: %s
      command: [%s]
      health_url: http://127.0.0.1:1/health
workloads: [{type: burst, count: 1}]
`
	tests := []struct {
		name                                   string
		url, metrics, links, launcher, command string
		want                                   []string // problem substrings; none: valid
	}{
		{name: "valid", url: "http://{link:client->router}", metrics: "{decode-0: 'http://127.0.0.1:2/metrics'}",
			links: "[{name: client->router, upstream: '127.0.0.1:1'}]", launcher: "'prog --flag'", command: "'--to={link-port:client->router}'"},
		{name: "unknown link in command", url: "http://127.0.0.1:1", metrics: "{}", links: "[{name: a->b, upstream: '127.0.0.1:1'}]",
			launcher: "prog", command: "'{link:nope}'", want: []string{"target.launch[0].command[0]: {link:nope} names no link"}},
		{name: "unknown link in url", url: "http://{link:nope}", metrics: "{}", links: "[]", launcher: "prog", command: "",
			want: []string{"target.url: {link:nope} names no link"}},
		{name: "bad link", url: "http://127.0.0.1:1", metrics: "{}", links: "[{name: 'a b', upstream: x}, {name: c, upstream: '1.2.3.4:5'}, {name: c, upstream: '1.2.3.4:5'}]",
			launcher: "prog", command: "", want: []string{"target.links[0].name", "target.links[0].upstream: must be host:port", "target.links[2].name: duplicate"}},
		{name: "bad metrics url", url: "http://127.0.0.1:1", metrics: "{decode: 'ftp://x'}", links: "[]", launcher: "prog", command: "",
			want: []string{"target.metrics_urls.decode: must be an http"}},
		{name: "unterminated launcher quote", url: "http://127.0.0.1:1", metrics: "{}", links: "[]", launcher: `"prog 'x"`, command: "",
			want: []string{"target.launch[0].launcher: unterminated '"}},
		{name: "no program", url: "http://127.0.0.1:1", metrics: "{}", links: "[]", launcher: "''", command: "",
			want: []string{"target.launch[0].command: must name a program"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := fmt.Sprintf(base, tc.url, tc.metrics, tc.links, tc.launcher, tc.command)
			sc, err := Parse("x.yaml", []byte(data), WithEnv(mapEnv(nil)))
			if len(tc.want) == 0 {
				require.NoError(t, err)
				assert.True(t, sc.HasMetrics())
				return
			}
			var ps Problems
			require.ErrorAs(t, err, &ps)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, ps, len(tc.want), "%v", err)
		})
	}
}
