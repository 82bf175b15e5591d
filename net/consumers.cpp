#include "net/consumers.h"
