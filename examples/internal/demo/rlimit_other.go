//go:build !unix

package demo

// maxConnsForDescriptors: no descriptor limit to respect here.
func maxConnsForDescriptors() int { return 1 << 20 }
