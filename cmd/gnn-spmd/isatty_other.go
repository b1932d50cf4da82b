//go:build !linux

package main

// isTerminal: outside Linux the epoch lines are printed, never a bar.
func isTerminal(fd uintptr) bool { return false }

func terminalWidth(fd uintptr) int { return 0 }
