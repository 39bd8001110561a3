// Package scenarios holds the YAML scenarios the harness runs and their loader.
//
// A scenario is configuration, not the runtime object. Loading is strict and happens in
// explicit steps, none of which starts anything:
//
//	sc, err := scenarios.Load("smoke", scenarios.WithFaultTypes(chaos.FaultTypes()))
//	// Load = expand ${VAR} and ${VAR:-default} in string values (WithEnv; an unset
//	//        variable without a default is a located problem; sc.Env lists them)
//	//      + decode strictly (unknown keys are errors, with file:line and field path)
//	//      + overrides (WithOverrides: --duration, --seed, --target)
//	//      + sc.ApplyDefaults()  (also expands fault_timeline: repeat or scale
//	//                             the fault list into concrete injections, kill#2, ...)
//	//      + sc.Validate(...)   (every problem at once, as Problems)
//	plan := scenarios.Plan(sc) // pure: workload windows and fault start/stop times
//	for _, step := range plan.Steps { fmt.Println(step) }
//
// Problems point at the line of the entry they are about; inside YAML anchors that is
// the alias or merge key that uses the anchor, not the anchor's definition.
//
// The launch packs for real targets (SGLang, vLLM) live in targets/ and are loaded by
// path. The embedded scenarios (the *.yaml files of this directory) are addressable by name;
// List returns them. scenario.schema.json describes the format for editors.
package scenarios
