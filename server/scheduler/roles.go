package scheduler

// Role is what a worker does.
type Role string

// Roles.
const (
	RoleColocated Role = "colocated" // waiting → running
	RolePrefill   Role = "prefill"   // bootstrap → waiting → forward → inflight
	RoleDecode    Role = "decode"    // prealloc → transfer → waiting → running (+ retracted)
)

// Semantics selects which behaviour the scheduler reproduces.
type Semantics string

// Semantics modes.
const (
	// SemanticsStrict keeps every invariant of DESIGN.md: bounded stages, queue limit in
	// every role, no head-of-line blocking, a watchdog that fires on idle stalls.
	SemanticsStrict Semantics = "strict"
	// SemanticsSGLang reproduces SGLang's documented PD behaviour.
	SemanticsSGLang Semantics = "sglang"
)

// SemanticsNames lists the semantics modes by name (what --semantics and a scenario's
// reference.semantics accept).
func SemanticsNames() []string { return []string{string(SemanticsStrict), string(SemanticsSGLang)} }
