package forensics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	// DefaultCollectorTimeout bounds one collector (one HTTP fetch, one py-spy dump).
	DefaultCollectorTimeout = 10 * time.Second
	// DefaultBundleTimeout bounds the whole bundle: collectors still running then are
	// recorded as timed out.
	DefaultBundleTimeout = 30 * time.Second
	// DefaultMaxFileBytes caps one file of the bundle.
	DefaultMaxFileBytes = 4 << 20
	// DefaultLogLines is how many trailing lines of each process log are kept.
	DefaultLogLines = 200
)

// TruncatedMarker ends a file cut at Config.MaxFileBytes.
const TruncatedMarker = "\n[forensics: truncated at %d bytes]\n"

// Process is one supervised process.
type Process struct {
	Name string
	PID  int
	// Python marks a process whose interpreter is Python (py-spy dumps it); the writer
	// also tells from /proc/<pid>/exe and argv[0] when it is false.
	Python bool
}

// Endpoint is one process's HTTP endpoint.
type Endpoint struct {
	Process string
	URL     string
}

// Sources is what a bundle is collected from.
type Sources struct {
	Processes []Process  // /proc state, py-spy, NVML names
	Debug     []Endpoint // /debug/requests URLs
	Metrics   []Endpoint // /metrics URLs
	PProf     []Endpoint // base URLs serving /debug/pprof/ (Go processes)
	LogDir    string     // each file's tail is kept ("" : none)
}

// GPUSnapshot reads the GPUs and the processes on them (NVML); pids are mapped to
// process names by the writer.
type GPUSnapshot func(ctx context.Context) (*GPUReport, error)

// Config bounds and equips the collectors. Zero fields take the defaults.
type Config struct {
	HTTP             *http.Client
	CollectorTimeout time.Duration
	BundleTimeout    time.Duration
	MaxFileBytes     int64
	LogLines         int
	// PySpy is the py-spy binary ("": looked up on PATH; absent: a note).
	PySpy string
	// ProcRoot is where /proc is mounted ("/proc").
	ProcRoot string
	// GPU reads NVML (nil: OpenNVML's reader; without a driver the bundle gets a note).
	GPU GPUSnapshot
	// Now is the clock of the manifest (time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.HTTP == nil {
		c.HTTP = http.DefaultClient
	}
	if c.CollectorTimeout <= 0 {
		c.CollectorTimeout = DefaultCollectorTimeout
	}
	if c.BundleTimeout <= 0 {
		c.BundleTimeout = DefaultBundleTimeout
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.LogLines <= 0 {
		c.LogLines = DefaultLogLines
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	if c.GPU == nil {
		c.GPU = NVMLSnapshot
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Item is one collector's entry in the manifest.
type Item struct {
	Collector string `json:"collector"`
	Process   string `json:"process,omitempty"`
	File      string `json:"file"` // relative to the bundle; a failure's note file
	Bytes     int64  `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
	// Skipped says why a collector the process does not offer (a 404 from /debug/pprof
	// on a server that has none) wrote nothing; it is not a failure.
	Skipped string  `json:"skipped,omitempty"`
	Seconds float64 `json:"seconds"`
}

// ErrNotOffered marks a collector whose endpoint the process does not have.
var ErrNotOffered = errors.New("not offered by this process")

// Manifest is MANIFEST.json: what the bundle holds.
type Manifest struct {
	Trigger  string    `json:"trigger"`
	Reason   string    `json:"reason,omitempty"`
	Dir      string    `json:"dir"` // the bundle's directory name, e.g. first-drop-12s
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Items    []Item    `json:"items"`
}

// Failed counts the items that failed.
func (m *Manifest) Failed() int {
	n := 0
	for _, it := range m.Items {
		if it.Error != "" {
			n++
		}
	}
	return n
}

// Note is the line for the report's reader; rel is the bundle's directory relative to
// the output directory. The path is a markdown link to the manifest, so summary.md
// (which prints notes as they are) links the bundle.
func (m *Manifest) Note(rel string) string {
	s := fmt.Sprintf("forensics bundle (%s", m.Trigger)
	if m.Reason != "" {
		s += ": " + m.Reason
	}
	skipped := 0
	for _, it := range m.Items {
		if it.Skipped != "" {
			skipped++
		}
	}
	s += fmt.Sprintf("): [%s](%s/MANIFEST.json), %d files collected, %d collectors failed",
		rel, filepath.ToSlash(rel), len(m.Items)-m.Failed()-skipped, m.Failed())
	if skipped > 0 {
		s += fmt.Sprintf(", %d not offered by the process", skipped)
	}
	return s
}

// job is one collector run: it returns the bytes of file.
type job struct {
	collector, process, file string
	run                      func(ctx context.Context) ([]byte, error)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// SafeName turns a process or file name into a file name.
func SafeName(s string) string {
	s = unsafeName.ReplaceAllString(s, "_")
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	return s
}

// Write collects a bundle into dir (created) and writes dir/MANIFEST.json. It returns
// the manifest, and an error only when dir or the manifest cannot be written: a
// collector's failure is an item of the manifest.
func Write(ctx context.Context, dir, trigger, reason string, src Sources, cfg Config) (*Manifest, error) {
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("forensics: %w", err)
	}
	m := &Manifest{Trigger: trigger, Reason: reason, Dir: filepath.Base(dir), Started: cfg.Now()}
	bctx, cancel := context.WithTimeout(ctx, cfg.BundleTimeout)
	defer cancel()
	// Why a collector did not finish: the bound, or the caller cutting the bundle short
	// (a second Ctrl-C cancels the interrupt bundle after a moment, not after the bound).
	unfinished := func() string {
		if ctx.Err() != nil {
			return fmt.Sprintf("cut short: %v", context.Cause(ctx))
		}
		return fmt.Sprintf("not finished within the bundle bound %v", cfg.BundleTimeout)
	}

	jobs := plan(src, cfg)
	items := make([]Item, len(jobs))
	done := make([]chan struct{}, len(jobs))
	var mu sync.Mutex // guards items once the bundle bound passed
	for i, j := range jobs {
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			it := runJob(bctx, dir, j, cfg, unfinished)
			mu.Lock()
			items[i] = it
			mu.Unlock()
		}()
	}
	for i, j := range jobs {
		select {
		case <-done[i]:
		case <-bctx.Done():
			// A collector stuck past the bound (a read the context cannot interrupt) is
			// abandoned; its goroutine ends with its own timeout.
			select {
			case <-done[i]:
			default:
				mu.Lock()
				if items[i].File == "" {
					items[i] = Item{Collector: j.collector, Process: j.process, File: j.file, Error: unfinished()}
				}
				mu.Unlock()
			}
		}
	}
	mu.Lock()
	m.Items = append([]Item(nil), items...)
	mu.Unlock()
	sort.SliceStable(m.Items, func(a, b int) bool { return m.Items[a].File < m.Items[b].File })
	m.Finished = cfg.Now()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, fmt.Errorf("forensics: manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "MANIFEST.json"), append(b, '\n'), 0o644); err != nil {
		return m, fmt.Errorf("forensics: manifest: %w", err)
	}
	return m, nil
}

// runJob runs one collector under its timeout and writes its file, or a note file;
// unfinished says why when the bundle ended first.
func runJob(ctx context.Context, dir string, j job, cfg Config, unfinished func() string) Item {
	start := time.Now()
	it := Item{Collector: j.collector, Process: j.process, File: j.file}
	cctx, cancel := context.WithTimeout(ctx, cfg.CollectorTimeout)
	defer cancel()
	data, err := j.run(cctx)
	it.Seconds = time.Since(start).Seconds()
	if ctx.Err() != nil {
		// Past the bundle bound, or cut short: Write has recorded this collector as
		// unfinished and may have written the manifest; nothing more goes into the bundle.
		return Item{Collector: j.collector, Process: j.process, File: j.file, Error: unfinished(), Seconds: it.Seconds}
	}
	if errors.Is(err, ErrNotOffered) {
		it.File, it.Skipped = "", err.Error()
		return it
	}
	if err != nil {
		it.Error = err.Error()
		it.File = j.file + ".error.txt"
		note := fmt.Sprintf("forensics: %s collector failed for %q: %v\n", j.collector, j.process, err)
		if len(data) > 0 { // partial output (py-spy's stderr) helps
			note += "\n" + string(data)
		}
		data = []byte(note)
	}
	if int64(len(data)) > cfg.MaxFileBytes {
		data = append(data[:cfg.MaxFileBytes:cfg.MaxFileBytes], fmt.Sprintf(TruncatedMarker, cfg.MaxFileBytes)...)
		it.Truncated = true
	}
	path := filepath.Join(dir, it.File)
	if werr := os.MkdirAll(filepath.Dir(path), 0o755); werr == nil {
		werr = os.WriteFile(path, data, 0o644)
		if werr != nil {
			it.Error = strings.TrimSpace(it.Error + "; write: " + werr.Error())
		}
	} else {
		it.Error = strings.TrimSpace(it.Error + "; write: " + werr.Error())
	}
	it.Bytes = int64(len(data))
	return it
}
