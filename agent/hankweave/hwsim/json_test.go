package hwsim

import "testing"

func TestJSNumber(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 1: "1", -3: "-3", 0.0042: "0.0042", 1e-7: "1e-7", 1e21: "1e+21", 123456789012: "123456789012", 2.5: "2.5"} {
		if got := jsNumber(f); got != want {
			t.Errorf("jsNumber(%v) = %s, want %s", f, got, want)
		}
	}
}
