// The module is header-only (one inline function); SwiftPM needs a source file to build it.
#include "CPaceSupport.h"
