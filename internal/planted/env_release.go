//go:build !planted

package planted

// Built reports whether this binary was built with the tag "planted": it
// is not, so nothing in it reads EnvVar, and only a test's Set switches a
// bug on.
const Built = false
