module github.com/spice-orch/spice-orch

go 1.26
