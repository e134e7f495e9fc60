// The module is header-only (inline functions); SwiftPM needs a source file to build it.
#include "CPaceSupport.h"
