/* core_dtype: dtype sizes/names/parse, op names/parse, error messages. */
#include "testutil.h"

int main(void) {
    static const size_t sizes[DT_NUM_DTYPES] = {4, 8, 2, 2, 1, 1, 4, 8};
    static const char *const names[DT_NUM_DTYPES] = {"f32", "f64", "f16", "bf16",
                                                     "i8",  "u8",  "i32", "i64"};
    CHECK(DT_NUM_DTYPES == 8 && DT_F32 == 0 && DT_I64 == 7, "dtype enum changed");
    for (int i = 0; i < DT_NUM_DTYPES; i++) {
        CHECK(dt_dtype_size((dt_dtype)i) == sizes[i], "size(%d) = %zu, want %zu", i,
              dt_dtype_size((dt_dtype)i), sizes[i]);
        CHECK(strcmp(dt_dtype_name((dt_dtype)i), names[i]) == 0, "name(%d) = '%s', want '%s'", i,
              dt_dtype_name((dt_dtype)i), names[i]);
        dt_dtype d = (dt_dtype)((i + 3) % DT_NUM_DTYPES);
        CHECK_OK(dt_dtype_parse(names[i], &d));
        CHECK(d == (dt_dtype)i, "parse('%s') = %d, want %d", names[i], (int)d, i);
    }
    /* Unknown dtypes: size 0 and name "?". */
    const int bad_dt[] = {DT_NUM_DTYPES, 99, -1, 1000000};
    for (size_t k = 0; k < sizeof bad_dt / sizeof bad_dt[0]; k++) {
        CHECK(dt_dtype_size((dt_dtype)bad_dt[k]) == 0, "size(%d) = %zu", bad_dt[k],
              dt_dtype_size((dt_dtype)bad_dt[k]));
        CHECK(strcmp(dt_dtype_name((dt_dtype)bad_dt[k]), "?") == 0, "name(%d) = '%s'", bad_dt[k],
              dt_dtype_name((dt_dtype)bad_dt[k]));
    }
    /* The aliases listed in dtype.h. */
    static const struct { const char *s; dt_dtype d; } aliases[] = {
        {"float", DT_F32}, {"double", DT_F64}, {"half", DT_F16}, {"bfloat16", DT_BF16},
        {"int8", DT_I8},   {"uint8", DT_U8},   {"int32", DT_I32}, {"int", DT_I32},
        {"int64", DT_I64}};
    for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++) {
        dt_dtype d = aliases[k].d == DT_F32 ? DT_I64 : DT_F32;
        CHECK_OK(dt_dtype_parse(aliases[k].s, &d));
        CHECK(d == aliases[k].d, "parse('%s') = %d, want %d", aliases[k].s, (int)d,
              (int)aliases[k].d);
    }
    /* Bad names: DT_ERR_INVALID, message naming the bad name. */
    static const char *const bad_names[] = {"f33", "bf", "int16", "f32 ", " f32", "fp32x",
                                            "u16", "i128", "f", "bf16_", "x"};
    for (size_t k = 0; k < sizeof bad_names / sizeof bad_names[0]; k++) {
        dt_dtype d;
        char want[64];
        snprintf(want, sizeof want, "'%s'", bad_names[k]);
        dt_clear_error();
        int rc = dt_dtype_parse(bad_names[k], &d);
        CHECK(rc == DT_ERR_INVALID, "parse('%s') -> %s", bad_names[k], dt_status_str(rc));
        /* quoted so that e.g. "f" is not found inside "dt_dtype_parse" by accident */
        CHECK(strstr(dt_last_error(), want) != NULL || strstr(dt_last_error(), bad_names[k]) != NULL,
              "message '%s' does not name '%s'", dt_last_error(), bad_names[k]);
    }
    {
        dt_dtype d;
        CHECK_ERR(dt_dtype_parse("", &d), DT_ERR_INVALID, "dt_dtype_parse");
        CHECK_ERR(dt_dtype_parse("float128", &d), DT_ERR_INVALID, "float128");
        CHECK_ERR(dt_dtype_parse(NULL, &d), DT_ERR_INVALID, "NULL");
        CHECK_ERR(dt_dtype_parse("f32", NULL), DT_ERR_INVALID, "NULL");
    }

    /* Ops. */
    static const char *const ops[DT_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};
    CHECK(DT_NUM_OPS == 5 && DT_SUM == 0 && DT_AVG == 4, "op enum changed");
    for (int i = 0; i < DT_NUM_OPS; i++) {
        CHECK(strcmp(dt_op_name((dt_op)i), ops[i]) == 0, "op name(%d) = '%s'", i,
              dt_op_name((dt_op)i));
        dt_op o = (dt_op)((i + 1) % DT_NUM_OPS);
        CHECK_OK(dt_op_parse(ops[i], &o));
        CHECK(o == (dt_op)i, "op parse('%s') = %d", ops[i], (int)o);
    }
    CHECK(strcmp(dt_op_name((dt_op)DT_NUM_OPS), "?") == 0, "op name(5) = '%s'",
          dt_op_name((dt_op)DT_NUM_OPS));
    CHECK(strcmp(dt_op_name((dt_op)-1), "?") == 0, "op name(-1) = '%s'", dt_op_name((dt_op)-1));
    {
        dt_op o;
        CHECK_ERR(dt_op_parse("mean", &o), DT_ERR_INVALID, "mean");
        CHECK_ERR(dt_op_parse("SUMM", &o), DT_ERR_INVALID, "SUMM");
        CHECK_ERR(dt_op_parse("", &o), DT_ERR_INVALID, "dt_op_parse");
        CHECK_ERR(dt_op_parse(NULL, &o), DT_ERR_INVALID, "NULL");
        CHECK_ERR(dt_op_parse("sum", NULL), DT_ERR_INVALID, "NULL");
    }
    return dt_test_finish("core_dtype");
}
