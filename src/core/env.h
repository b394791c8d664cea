/* src/core/env.h - internal: reading settings from the environment, with
 * errors that name the variable. */
#ifndef DT_CORE_ENV_H
#define DT_CORE_ENV_H

/* A boolean: 1/0, true/false, yes/no, on/off (any case). Unset or empty:
 * *on = dflt. DT_ERR_INVALID naming the variable otherwise. */
int dt_env_bool(const char *var, int dflt, int *on);

/* A number in [lo, hi] (strtod syntax, trailing blanks allowed). Unset or
 * empty: *found = 0 and *out untouched. DT_ERR_INVALID naming the variable
 * otherwise. */
int dt_env_number(const char *var, double lo, double hi, double *out, int *found);

#endif
