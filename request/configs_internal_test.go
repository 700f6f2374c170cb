package request

import (
	"math"
	"testing"
)

// Doubles are shown as Kafka (Java's Double.toString) shows them.
func TestJavaDouble(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 0.5: "0.5", 1: "1.0", 0.01: "0.01", 5e6: "5000000.0", 1e7: "1.0E7", 1.5e7: "1.5E7",
		math.MaxFloat64: "1.7976931348623157E308", 1e-5: "1.0E-5",
	} {
		if got := javaDouble(f); got != want {
			t.Errorf("javaDouble(%v) = %q, want %q", f, got, want)
		}
	}
}
