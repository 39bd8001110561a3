package scenarios

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite golden files and scenario.schema.json")

const schemaFile = "scenario.schema.json"

// enums lists the closed sets of values, by struct type and YAML key.
var enums = map[string][]string{
	"Workload.type":       {WorkloadAgents, WorkloadOpenLoop, WorkloadBurst, WorkloadProbe, WorkloadTrace},
	"Trace.format":        {"mooncake", "azure", "burstgpt"},
	"Workload.endpoint":   {EndpointChat, EndpointCompletions},
	"Pacer.type":          {PacerConstant, PacerLinear, PacerSine, PacerPoisson},
	"Reference.backend":   {"tinyref", "simtime", "paced"},
	"Reference.semantics": {"strict", "sglang"},
	"Launch.role":         {"router", "prefill", "decode", "colocated"},
	"FaultTimeline.cover": {CoverFixed, CoverRepeat, CoverScale},
	"Explore.faults":      {ExploreFaultsScenario, ExploreFaultsCatalogue, ExploreFaultsNone},
}

const durationPattern = `^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`

// fieldDocs reads the doc comments of the struct fields in types.go.
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types.go", nil, parser.ParseComments)
	require.NoError(t, err)
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, fld := range st.Fields.List {
			if fld.Doc == nil {
				continue
			}
			text := strings.Join(strings.Fields(fld.Doc.Text()), " ")
			for _, name := range fld.Names {
				docs[ts.Name.Name+"."+name.Name] = text
			}
		}
		return true
	})
	return docs
}

func schemaFor(t reflect.Type, docs map[string]string) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return map[string]any{"type": "string", "pattern": durationPattern}
	}
	switch t.Kind() {
	case reflect.Struct:
		props := map[string]any{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			s := schemaFor(f.Type, docs)
			if d := docs[t.Name()+"."+f.Name]; d != "" {
				s["description"] = d
			}
			if e, ok := enums[t.Name()+"."+name]; ok {
				s["enum"] = e
			}
			props[name] = s
		}
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaFor(t.Elem(), docs)}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": schemaFor(t.Elem(), docs)}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Float64, reflect.Float32:
		return map[string]any{"type": "number"}
	}
	return map[string]any{}
}

func generateSchema(t *testing.T) []byte {
	s := schemaFor(reflect.TypeFor[Scenario](), fieldDocs(t))
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = "https://pdsoak.local/scenario.schema.json"
	s["title"] = "pdsoak scenario"
	s["description"] = "A harness scenario: target, workloads, deadlines, faults and assertions. Generated from scenarios/types.go by `go test ./scenarios -run TestSchema -update`."
	s["required"] = []string{"workloads"}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(s))
	return buf.Bytes()
}

// TestSchemaUpToDate checks that scenario.schema.json lists every key the Go types know
// (it is generated from them; run with -update after changing types.go).
func TestSchemaUpToDate(t *testing.T) {
	want := generateSchema(t)
	if *update {
		require.NoError(t, os.WriteFile(schemaFile, want, 0o644))
	}
	got, err := os.ReadFile(schemaFile)
	require.NoError(t, err, "run go test ./scenarios -run TestSchema -update")
	var schema map[string]any
	require.NoError(t, json.Unmarshal(got, &schema), "%s is not JSON", schemaFile)
	// Every YAML key path of the Go types must be a schema property path.
	keys := map[string]bool{}
	schemaKeys(schema, "", keys)
	for _, k := range typeKeys(reflect.TypeFor[Scenario](), "") {
		assert.True(t, keys[k], "schema lacks key %s", k)
	}
	assert.Equal(t, string(want), string(got), "%s is stale; run go test ./scenarios -run TestSchema -update", schemaFile)
}

func typeKeys(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == durationType {
		return nil
	}
	var out []string
	for name, f := range yamlFields(t) {
		p := prefix + "." + name
		out = append(out, p)
		out = append(out, typeKeys(f.Type, p)...)
	}
	sort.Strings(out)
	return out
}

func schemaKeys(s map[string]any, prefix string, out map[string]bool) {
	if items, ok := s["items"].(map[string]any); ok {
		schemaKeys(items, prefix, out)
	}
	props, _ := s["properties"].(map[string]any)
	for name, sub := range props {
		p := prefix + "." + name
		out[p] = true
		if m, ok := sub.(map[string]any); ok {
			schemaKeys(m, p, out)
		}
	}
}

// validateSchema checks a decoded YAML value against the subset of JSON Schema the
// generator emits (type, properties, additionalProperties, items, enum, pattern).
func validateSchema(s map[string]any, v any, path string) []string {
	var errs []string
	typ, _ := s["type"].(string)
	switch typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return []string{path + ": want object"}
		}
		props, _ := s["properties"].(map[string]any)
		for k, val := range m {
			sub, ok := props[k].(map[string]any)
			if !ok {
				switch ap := s["additionalProperties"].(type) {
				case bool:
					if !ap {
						errs = append(errs, path+"."+k+": not allowed")
					}
					continue
				case map[string]any:
					sub = ap
				default:
					continue
				}
			}
			errs = append(errs, validateSchema(sub, val, path+"."+k)...)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return []string{path + ": want array"}
		}
		items, _ := s["items"].(map[string]any)
		for i, e := range a {
			errs = append(errs, validateSchema(items, e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return []string{fmt.Sprintf("%s: want string, got %T", path, v)}
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			errs = append(errs, path+": does not match "+p)
		}
	case "integer":
		if _, ok := v.(int); !ok {
			errs = append(errs, fmt.Sprintf("%s: want integer, got %T", path, v))
		}
	case "number":
		switch v.(type) {
		case int, float64:
		default:
			errs = append(errs, fmt.Sprintf("%s: want number, got %T", path, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			errs = append(errs, fmt.Sprintf("%s: want boolean, got %T", path, v))
		}
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, x := range e {
			if x == v {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v not in %v", path, v, e))
		}
	}
	return errs
}

func TestSchemaAcceptsShippedScenarios(t *testing.T) {
	raw, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(raw, &schema))
	list := List()
	require.NotEmpty(t, list, "no embedded scenarios")
	for _, info := range list {
		t.Run(info.Name, func(t *testing.T) {
			data, _ := Embedded(info.Name)
			var v any
			require.NoError(t, yaml.Unmarshal(data, &v))
			assert.Empty(t, validateSchema(schema, v, info.File))
		})
	}
}

func TestSchemaRejectsUnknownKey(t *testing.T) {
	raw, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(raw, &schema))
	tests := []struct {
		name string
		yaml string
	}{
		{"misspelt workload key", "workloads:\n  - type: agents\n    agnets: 3\n"},
		{"unknown cover", "workloads: [{type: agents}]\nfault_timeline: {cover: cycle}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			require.NoError(t, yaml.Unmarshal([]byte(tt.yaml), &v))
			assert.NotEmpty(t, validateSchema(schema, v, "x"), "schema accepted it")
		})
	}
}
