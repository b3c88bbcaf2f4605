// The main() of the unit-test programs (Catch's implementation is catch_runner.cpp's).
#include "catch_runner.hpp"

int main(int argc, char* argv[]) { return specdec_test::run_catch(argc, argv); }
