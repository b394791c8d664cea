/* dtrain/dtrain.h - umbrella header: include this one. */
#ifndef DTRAIN_DTRAIN_H
#define DTRAIN_DTRAIN_H

#define DTRAIN_VERSION_MAJOR 0
#define DTRAIN_VERSION_MINOR 1
#define DTRAIN_VERSION_PATCH 0

#include "dtrain/status.h"
#include "dtrain/dtype.h"
#include "dtrain/comm.h"
#include "dtrain/coll.h"
#include "dtrain/config.h"
#include "dtrain/trace.h"
#include "dtrain/mem.h"
#include "dtrain/ddp.h"
#include "dtrain/optim.h"
#include "dtrain/zero.h"
#include "dtrain/nn.h"
#include "dtrain/model.h"
#include "dtrain/data.h"
#include "dtrain/text.h"
#include "dtrain/safetensors.h"
#include "dtrain/ckpt.h"
#include "dtrain/train.h"

#endif
