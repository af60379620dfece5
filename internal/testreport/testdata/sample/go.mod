// A module of tests that pass, skip and fail, whose `go test -json`
// TestSampleRun reads. Not part of toold (testdata: go test ./... skips it).
module example.test/sample

go 1.26
