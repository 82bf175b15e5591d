// Moved to tests/common/caught.h (the suites' one exception-capture helper); this forwarder stays
// for the files that still include the old path.
#pragma once

#include "tests/common/caught.h"
