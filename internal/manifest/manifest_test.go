package manifest

import (
	"testing"

	"github.com/redisrate/redisrate/scripts"
)

// Each entry carries package scripts' Spec of the same script, in the same
// order, and Lookup finds each by name and nothing else.
func TestSpecsCarryTheScripts(t *testing.T) {
	pub := scripts.Specs()
	got := Specs()
	if len(got) != len(pub) {
		t.Fatalf("%d specs, package scripts has %d", len(got), len(pub))
	}
	for i, s := range got {
		if s.Spec != pub[i] {
			t.Errorf("spec %d: %+v, package scripts says %+v", i, s.Spec.Name, pub[i].Name)
		}
		if l, ok := Lookup(s.Name); !ok || l != s {
			t.Errorf("Lookup(%q) = %v, %v", s.Name, l.Name, ok)
		}
		if s.Tag == "" || s.MaxLimit < 1 || s.TimeMax < 1 || (s.Log != (s.Fields == 0)) {
			t.Errorf("%s: an incomplete manifest entry: %+v", s.Name, s)
		}
	}
	if _, ok := Lookup("reset"); ok {
		t.Error("Lookup found a script with no manifest")
	}
	got[0].Tag = "changed"
	if Specs()[0].Tag == "changed" {
		t.Error("Specs hands out the package's own slice")
	}
}
