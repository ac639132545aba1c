package apisurface

import (
	"fmt"
	"testing"
)

func TestPrintCounts(t *testing.T) {
	for _, dir := range []string{"../..", "../../scripts"} {
		names, err := Names(dir)
		if err != nil {
			t.Fatal(err)
		}
		c := Counts(names)
		t.Logf("%s: %d names besides fields (types %d, funcs %d, methods %d, consts %d, vars %d), fields %d",
			dir, len(names)-c["field"], c["type"], c["func"], c["method"], c["const"], c["var"], c["field"])
		for _, n := range names {
			fmt.Println(dir, n.Kind, n.Name)
		}
	}
}
