// Package version says which build of pdsoak is running: the module version and the VCS
// revision the Go toolchain stamped into the binary (debug.ReadBuildInfo). Both commands
// print it for --version, and the harness records it in every run's provenance.
//
//	fmt.Println(version.String()) // "pdsoak (devel) rev 72a5c9a1b2c3 (modified) go1.26.8"
package version
