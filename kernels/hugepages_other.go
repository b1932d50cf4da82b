//go:build !linux

package kernels

func adviseHuge([]float32) {}
