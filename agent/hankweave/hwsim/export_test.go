package hwsim

// UnzstdRaw lets the external tests (package hwsim_test) read a compacted journal.
var UnzstdRaw = unzstdRaw
