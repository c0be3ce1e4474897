package main

import (
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"
)

// An exported function that hands out a type of an internal package is listed, and
// reported: an author could see the type but not name it.
func TestInternalTypeReported(t *testing.T) {
	secret := types.NewPackage("example.com/m/internal/secret", "secret")
	env := types.NewNamed(types.NewTypeName(token.NoPos, secret, "Env", nil), types.NewStruct(nil, nil), nil)
	kit := types.NewPackage("example.com/m/testkit", "testkit")
	result := types.NewTuple(types.NewVar(token.NoPos, kit, "", types.NewPointer(env)))
	kit.Scope().Insert(types.NewFunc(token.NoPos, kit, "NewEnv", types.NewSignatureType(nil, nil, nil, nil, result, false)))
	kit.Scope().Insert(types.NewFunc(token.NoPos, kit, "Fine", types.NewSignatureType(nil, nil, nil, nil, nil, false)))

	l := listing{pkg: kit, prefix: "pkg testkit, "}
	l.list()
	if want := []string{"pkg testkit, func Fine()", "pkg testkit, func NewEnv() *secret.Env"}; !slices.Equal(l.lines, want) {
		t.Errorf("lines %q, want %q", l.lines, want)
	}
	if len(l.problems) != 1 || !strings.Contains(l.problems[0], "example.com/m/internal/secret.Env") {
		t.Errorf("problems %q, want one naming example.com/m/internal/secret.Env", l.problems)
	}
}
