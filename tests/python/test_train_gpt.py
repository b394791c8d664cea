"""dtrain.train.fit with the GPT's options (issue 19): the text model, its
sizes, recomputation, periodic evaluation and the sample, through the flags
fit passes to the C trainer; the result carries the new fields
(test_loss, tokens_per_s). Runs standalone or under mpiexec (then data
parallel, and ZeRO-3 at 2 ranks and more)."""
import math
import sys

import dtrain
from dtrain import distributed as dist

import harness as H
from harness import check, expect_raises

comm = dist.get_communicator()
R, S = comm.world_rank, comm.world_size


def t_fit_gpt():
    cfg = dict(dist.get_config().to_dict())
    cfg["zero_opt_level"] = 3 if S > 1 else 0
    res = dtrain.train.fit(config=cfg, model="gpt", preset="gpt-test", n_layer=1, n_embd=32, n_head=2,
                           block_size=32, batch_size=4, max_steps=6, optimizer="adamw", lr=1e-3,
                           recompute=True, eval_every=3, test_limit=8, sample_prompt="The ",
                           sample_temperature=0.5, sample_length=20, quiet=True)
    check("fit returned a result", isinstance(res, dict), res)
    check("6 steps", res["steps"] == 6, res)
    check("validation loss per token in (0, ln 256 + 1)", 0 < res["test_loss"] < math.log(256) + 1, res)
    check("tokens/s > 0", res["tokens_per_s"] > 0, res)
    check("samples/s = tokens/s / block size",
          abs(res["samples_per_s"] * 32 - res["tokens_per_s"]) <= 1e-6 * res["tokens_per_s"], res)


def t_fit_gpt_flag_errors():
    expect_raises("recompute on a classifier", dtrain.DtrainError,
                  lambda: dtrain.train.fit(model="mlp", recompute=1), "--recompute applies to --model gpt only",
                  status="DT_ERR_INVALID")
    expect_raises("n_embd not divisible by n_head", dtrain.DtrainError,
                  lambda: dtrain.train.fit(model="gpt", preset="gpt-test", n_head=5),
                  "n_embd=64 is not divisible by n_head=5", status="DT_ERR_INVALID")


for name, fn in list(globals().items()):
    if name.startswith("t_") and callable(fn):
        H.guarded(name, fn)
print("%s%d passed, %d failed" % ("[rank %d] " % R if S > 1 else "", H._passed, H._failed))
sys.exit(1 if H._failed else 0)
