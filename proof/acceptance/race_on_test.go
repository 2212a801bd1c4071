//go:build race

package acceptance

const raceEnabled = true
