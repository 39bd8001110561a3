package failpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrParse is wrapped by every error ParseTerms returns.
var ErrParse = errors.New("failpoint: could not parse terms")

// Limits on a term string, so that the admin endpoint cannot be used to allocate without bound.
const (
	MaxTermsLen  = 4096
	MaxChainLen  = 64
	MaxSleep     = time.Hour
	maxModsTerm  = 8
	maxCountTerm = 1 << 40
)

// Action is what a term does when it fires.
type Action string

// The actions of gofail's grammar (minus "break", which attaches gdb) plus "pause".
const (
	ActOff    Action = "off"    // fire nothing; Eval reports "not fired"
	ActReturn Action = "return" // Eval returns the term's argument
	ActSleep  Action = "sleep"  // Eval sleeps for the argument (a duration, or an int in ms)
	ActPanic  Action = "panic"  // Eval panics
	ActPrint  Action = "print"  // Eval logs the hit and continues
	ActPause  Action = "pause"  // Eval blocks until the failpoint is disabled or changed, or ctx ends
)

// Term is one parsed element of a chain: modifiers, an action and an optional argument.
type Term struct {
	// Percent, when HasPercent, is the probability (0..100) that the term fires.
	Percent    float64
	HasPercent bool
	// Count, when HasCount, is how many more times the term may fire.
	Count    int64
	HasCount bool
	Action   Action
	// Arg is the argument between parentheses, unquoted; HasArg tells "return()" and
	// "return" apart from "return(x)".
	Arg    string
	HasArg bool
	// Sleep is the parsed duration of a sleep term.
	Sleep time.Duration
}

// String renders the term back in the grammar (canonical form).
func (t Term) String() string {
	var b strings.Builder
	if t.HasPercent {
		b.WriteString(strconv.FormatFloat(t.Percent, 'f', -1, 64))
		b.WriteByte('%')
	}
	if t.HasCount {
		b.WriteString(strconv.FormatInt(t.Count, 10))
		b.WriteByte('*')
	}
	b.WriteString(string(t.Action))
	if t.HasArg {
		b.WriteByte('(')
		if isBareArg(t.Arg) {
			b.WriteString(t.Arg)
		} else {
			b.WriteString(strconv.Quote(t.Arg))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// ParseTerms parses a chain in gofail's grammar:
//
//	chain  := term ( "->" term )*
//	term   := mod* action [ "(" arg ")" ]
//	mod    := number "%" | integer "*"
//	action := off | return | sleep | panic | print | pause
//	arg    := Go-quoted string | integer | true | false | bare word (no spaces, quotes or parens)
//
// Unlike gofail it accepts integer percentages ("50%"), bare-word arguments
// ("return(corrupt)") and Go duration literals without quotes ("sleep(1.5s)"); a sleep
// argument that is an integer means milliseconds. Whitespace around "->" is ignored.
func ParseTerms(s string) ([]Term, error) {
	if len(s) > MaxTermsLen {
		return nil, fmt.Errorf("%w: %d bytes is longer than %d", ErrParse, len(s), MaxTermsLen)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrParse)
	}
	var chain []Term
	rest := s
	for {
		rest = strings.TrimLeft(rest, " \t")
		t, n, err := parseTerm(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: %q at offset %d: %w", ErrParse, s, len(s)-len(rest), err)
		}
		chain = append(chain, t)
		if len(chain) > MaxChainLen {
			return nil, fmt.Errorf("%w: more than %d terms", ErrParse, MaxChainLen)
		}
		rest = strings.TrimLeft(rest[n:], " \t")
		if rest == "" {
			return chain, nil
		}
		if !strings.HasPrefix(rest, "->") {
			return nil, fmt.Errorf("%w: %q at offset %d: expected \"->\"", ErrParse, s, len(s)-len(rest))
		}
		rest = rest[2:]
	}
}

// parseTerm parses one term at the start of s and returns it with the bytes consumed.
func parseTerm(s string) (Term, int, error) {
	var t Term
	i := 0
	for mods := 0; ; mods++ {
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		if j == i {
			break
		}
		if mods >= maxModsTerm {
			return t, 0, errors.New("too many modifiers")
		}
		if j >= len(s) {
			return t, 0, errors.New("number without '%' or '*'")
		}
		num := s[i:j]
		switch s[j] {
		case '%':
			if t.HasPercent {
				return t, 0, errors.New("two percentages in one term")
			}
			p, err := strconv.ParseFloat(num, 64)
			if err != nil || p < 0 || p > 100 {
				return t, 0, fmt.Errorf("bad percentage %q", num)
			}
			t.Percent, t.HasPercent = p, true
		case '*':
			if t.HasCount {
				return t, 0, errors.New("two counts in one term")
			}
			c, err := strconv.ParseInt(num, 10, 64)
			if err != nil || c < 0 || c > maxCountTerm {
				return t, 0, fmt.Errorf("bad count %q", num)
			}
			t.Count, t.HasCount = c, true
		default:
			return t, 0, fmt.Errorf("number %q without '%%' or '*'", num)
		}
		i = j + 1
	}
	j := i
	for j < len(s) && s[j] >= 'a' && s[j] <= 'z' {
		j++
	}
	switch act := Action(s[i:j]); act {
	case ActOff, ActReturn, ActSleep, ActPanic, ActPrint, ActPause:
		t.Action = act
	case "":
		return t, 0, errors.New("missing action")
	default:
		return t, 0, fmt.Errorf("unknown action %q", act)
	}
	i = j
	if i < len(s) && s[i] == '(' {
		arg, n, err := parseArg(s[i:])
		if err != nil {
			return t, 0, err
		}
		t.Arg, t.HasArg = arg, n > 2
		i += n
	}
	switch t.Action {
	case ActSleep:
		if !t.HasArg {
			return t, 0, errors.New("sleep needs a duration")
		}
		d, err := parseSleep(t.Arg)
		if err != nil {
			return t, 0, err
		}
		t.Sleep = d
	case ActOff, ActPause:
		if t.HasArg {
			return t, 0, fmt.Errorf("%s takes no argument", t.Action)
		}
	}
	return t, i, nil
}

// parseArg parses "(...)" at the start of s; it returns the unquoted argument and the
// bytes consumed including both parentheses.
func parseArg(s string) (string, int, error) {
	if len(s) >= 2 && s[1] == ')' {
		return "", 2, nil
	}
	if len(s) >= 2 && s[1] == '"' {
		q, err := strconv.QuotedPrefix(s[1:])
		if err != nil {
			return "", 0, fmt.Errorf("bad quoted argument: %w", err)
		}
		if len(s) < 1+len(q)+1 || s[1+len(q)] != ')' {
			return "", 0, errors.New("missing ')' after quoted argument")
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return "", 0, fmt.Errorf("bad quoted argument: %w", err)
		}
		return v, len(q) + 2, nil
	}
	end := strings.IndexByte(s, ')')
	if end < 0 {
		return "", 0, errors.New("missing ')'")
	}
	arg := s[1:end]
	if !isBareArg(arg) {
		return "", 0, fmt.Errorf("bad bare argument %q (quote it)", arg)
	}
	return arg, end + 1, nil
}

func isBareArg(a string) bool {
	if a == "" {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if c <= ' ' || c >= 0x7f || c == '(' || c == ')' || c == '"' || c == '\'' || c == '\\' || c == '`' {
			return false
		}
	}
	return true
}

func parseSleep(a string) (time.Duration, error) {
	var d time.Duration
	if ms, err := strconv.ParseInt(a, 10, 64); err == nil {
		if ms < 0 || ms > MaxSleep.Milliseconds() {
			return 0, fmt.Errorf("sleep %q out of range [0, %s]", a, MaxSleep)
		}
		d = time.Duration(ms) * time.Millisecond
	} else {
		pd, err := time.ParseDuration(a)
		if err != nil {
			return 0, fmt.Errorf("bad sleep duration %q", a)
		}
		d = pd
	}
	if d < 0 || d > MaxSleep {
		return 0, fmt.Errorf("sleep %q out of range [0, %s]", a, MaxSleep)
	}
	return d, nil
}
