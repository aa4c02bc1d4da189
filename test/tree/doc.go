// Package tree holds tests over the repository's source tree rather than over one
// package's behaviour: what the production binary links, how long functions are, and
// that code and user-visible text carry no pointers to project history or to files
// outside the repository. internal/podcontract's TestNoStrayLiterals is the fourth such
// guard; it lives next to the literals it protects.
package tree
