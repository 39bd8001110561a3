package failpoint

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseTerms(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  []Term
		canon string
	}{
		{name: "off", in: "off", want: []Term{{Action: ActOff}}, canon: "off"},
		{name: "bare return", in: "return", want: []Term{{Action: ActReturn}}, canon: "return"},
		{name: "empty parens", in: "return()", want: []Term{{Action: ActReturn}}, canon: "return"},
		{name: "quoted arg", in: `return("corrupt")`, want: []Term{{Action: ActReturn, Arg: "corrupt", HasArg: true}}, canon: "return(corrupt)"},
		{name: "bare arg", in: "return(drop)", want: []Term{{Action: ActReturn, Arg: "drop", HasArg: true}}, canon: "return(drop)"},
		{name: "int arg", in: "return(42)", want: []Term{{Action: ActReturn, Arg: "42", HasArg: true}}, canon: "return(42)"},
		{name: "quoted with spaces", in: `return("a b)")`, want: []Term{{Action: ActReturn, Arg: "a b)", HasArg: true}}, canon: `return("a b)")`},
		{name: "sleep ms", in: "sleep(50)", want: []Term{{Action: ActSleep, Arg: "50", HasArg: true, Sleep: 50 * time.Millisecond}}, canon: "sleep(50)"},
		{name: "sleep duration", in: `sleep("1.5s")`, want: []Term{{Action: ActSleep, Arg: "1.5s", HasArg: true, Sleep: 1500 * time.Millisecond}}, canon: "sleep(1.5s)"},
		{name: "sleep bare duration", in: "sleep(200ms)", want: []Term{{Action: ActSleep, Arg: "200ms", HasArg: true, Sleep: 200 * time.Millisecond}}, canon: "sleep(200ms)"},
		{name: "pause", in: "pause", want: []Term{{Action: ActPause}}, canon: "pause"},
		{name: "panic msg", in: "panic(boom)", want: []Term{{Action: ActPanic, Arg: "boom", HasArg: true}}, canon: "panic(boom)"},
		{name: "print", in: "print", want: []Term{{Action: ActPrint}}, canon: "print"},
		{name: "count", in: "3*return(x)", want: []Term{{Action: ActReturn, Arg: "x", HasArg: true, Count: 3, HasCount: true}}, canon: "3*return(x)"},
		{name: "int percent", in: "50%off", want: []Term{{Action: ActOff, Percent: 50, HasPercent: true}}, canon: "50%off"},
		{name: "float percent", in: "12.5%pause", want: []Term{{Action: ActPause, Percent: 12.5, HasPercent: true}}, canon: "12.5%pause"},
		{name: "both mods", in: "10%2*return(1)", want: []Term{{Action: ActReturn, Arg: "1", HasArg: true, Percent: 10, HasPercent: true, Count: 2, HasCount: true}}, canon: "10%2*return(1)"},
		{name: "chain", in: "2*off->return(corrupt)", want: []Term{{Action: ActOff, Count: 2, HasCount: true}, {Action: ActReturn, Arg: "corrupt", HasArg: true}}, canon: "2*off->return(corrupt)"},
		{name: "chain with spaces", in: " 1*pause -> sleep(10) ", want: []Term{{Action: ActPause, Count: 1, HasCount: true}, {Action: ActSleep, Arg: "10", HasArg: true, Sleep: 10 * time.Millisecond}}, canon: "1*pause->sleep(10)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTerms(tc.in)
			if err != nil {
				t.Fatalf("ParseTerms(%q): %v", tc.in, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d terms %+v, want %+v", len(got), got, tc.want)
			}
			var parts []string
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("term %d = %+v, want %+v", i, got[i], tc.want[i])
				}
				parts = append(parts, got[i].String())
			}
			if c := strings.Join(parts, "->"); c != tc.canon {
				t.Errorf("canonical = %q, want %q", c, tc.canon)
			}
		})
	}
}

func TestParseTermsErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"unknown action", "explode", "unknown action"},
		{"break unsupported", "break", "unknown action"},
		{"missing action", "3*", "missing action"},
		{"number without mod", "3return", "without"},
		{"percent over 100", "101%off", "bad percentage"},
		{"float count", "1.5*off", "bad count"},
		{"two counts", "1*2*off", "two counts"},
		{"sleep without arg", "sleep", "needs a duration"},
		{"bad sleep", "sleep(forever)", "bad sleep"},
		{"negative sleep", `sleep("-1s")`, "out of range"},
		{"huge sleep", "sleep(2h)", "out of range"},
		{"pause with arg", "pause(1)", "no argument"},
		{"off with arg", "off(1)", "no argument"},
		{"unclosed", "return(x", "missing ')'"},
		{"bad bare arg", "return(a b)", "bare argument"},
		{"trailing junk", "return(x)y", `expected "->"`},
		{"dangling arrow", "off->", "missing action"},
		{"double arrow", "off->->off", "missing action"},
		{"too long", strings.Repeat("off->", 1000) + "off", "longer than"},
		{"too many terms", strings.Repeat("off->", 70) + "off", "more than"},
		{"bad quote", `return("x)`, "bad quoted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTerms(tc.in)
			if err == nil {
				t.Fatalf("ParseTerms(%q) succeeded, want error containing %q", tc.in, tc.want)
			}
			if !errors.Is(err, ErrParse) {
				t.Errorf("error %v does not wrap ErrParse", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// FuzzParseTerms checks that the parser never panics and that every accepted chain
// round-trips through its canonical form.
func FuzzParseTerms(f *testing.F) {
	for _, s := range []string{"off", "return(x)", `return("a b")`, "sleep(10)", "sleep(1s)", "pause",
		"50%2*return(1)->off", "3*off->pause", "panic", "print(x)", "1.5%off", "return(", "->", "9999999999999999999*off"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		chain, err := ParseTerms(s)
		if err != nil {
			return
		}
		var parts []string
		for _, tm := range chain {
			parts = append(parts, tm.String())
		}
		canon := strings.Join(parts, "->")
		again, err := ParseTerms(canon)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canon, s, err)
		}
		if len(again) != len(chain) {
			t.Fatalf("round trip of %q changed length", s)
		}
		for i := range chain {
			if again[i] != chain[i] {
				t.Fatalf("round trip of %q: term %d %+v != %+v", s, i, again[i], chain[i])
			}
		}
	})
}
