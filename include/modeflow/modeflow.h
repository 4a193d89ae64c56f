#pragma once
// The public umbrella header: everything a user of modeflow needs, one include.

#include "base/error.h"
#include "base/logging.h"
#include "context/context.h"
