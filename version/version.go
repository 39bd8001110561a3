package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is the build's identity. Fields the toolchain did not stamp are empty.
type Info struct {
	Module    string // module version, "(devel)" for a local build
	Revision  string // VCS revision
	Modified  bool   // the working tree had uncommitted changes
	GoVersion string
}

// Get reads the build information of the running binary.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Version, GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// RevisionString is the revision with "+dirty" when the tree was modified ("" when unknown).
func (in Info) RevisionString() string {
	if in.Revision == "" {
		return ""
	}
	if in.Modified {
		return in.Revision + "+dirty"
	}
	return in.Revision
}

// String is one line for --version.
func (in Info) String() string {
	var b strings.Builder
	b.WriteString("pdsoak ")
	if in.Module == "" {
		b.WriteString("(unknown)")
	} else {
		b.WriteString(in.Module)
	}
	if in.Revision != "" {
		rev := in.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		fmt.Fprintf(&b, " rev %s", rev)
		if in.Modified {
			b.WriteString(" (modified)")
		}
	}
	if in.GoVersion != "" {
		fmt.Fprintf(&b, " %s", in.GoVersion)
	}
	return b.String()
}

// String is Get().String().
func String() string { return Get().String() }
