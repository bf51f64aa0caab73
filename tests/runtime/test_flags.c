/*
 * The one flag parser (src/runtime/flags.c) on a table with every kind of
 * flag: values land in the config struct, `given` tells which flags
 * appeared, operands are found (or refused), and every error is one line
 * naming the flag, the value and what is accepted. --help lines align the
 * help text at column 26 under their section headings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/flags.h"

#define ERRLEN 512
#define MAX_TAGS 3

typedef struct cfg {
    bool verbose;
    uint32_t envs;
    uint64_t steps;
    double timeout;
    const char *name;
    int mode;
    const char *tags[MAX_TAGS];
    uint32_t ntags;
    const char *long_one;
} cfg_t;

/* --tag, repeatable (RO_FLAG_FN): field is the config. */
static int parse_tag(void *field, const char *value, char *err, size_t errlen)
{
    cfg_t *c = field;
    if (c->ntags == MAX_TAGS)
        return ro__errorf(err, errlen, RO_EINVAL, "--tag: more than %d tags", MAX_TAGS);
    c->tags[c->ntags++] = value;
    return 0;
}

static const char *const modes[] = {"fast", "safe", "exact", NULL};

#define AT(field) offsetof(cfg_t, field)

/* Every kind; the indices are those of `given`. */
enum {
    F_GENERAL,
    F_VERBOSE,
    F_ENVS,
    F_STEPS,
    F_TIMEOUT,
    F_OUTPUT,
    F_NAME,
    F_MODE,
    F_TAG,
    F_LONG,
    NF
};
static const ro_flag_t flags[NF] = {
    [F_GENERAL] = {.kind = RO_FLAG_SECTION, .name = "general"},
    [F_VERBOSE] = {RO_FLAG_BOOL, "verbose", NULL, AT(verbose), .help = "say more"},
    [F_ENVS] = {RO_FLAG_U32, "num-envs", "N", AT(envs), 1, 1024,
                .help = "envs to run\n(default 4)"},
    [F_STEPS] = {RO_FLAG_U64, "steps", "N", AT(steps), 0, UINT64_MAX, .help = "steps"},
    [F_TIMEOUT] = {RO_FLAG_SECONDS, "timeout", "S", AT(timeout), 100, .help = "seconds (>= 0.1)"},
    [F_OUTPUT] = {.kind = RO_FLAG_SECTION, .name = "output"},
    [F_NAME] = {RO_FLAG_STRING, "name", "NAME", AT(name), .help = "a name"},
    [F_MODE] = {RO_FLAG_CHOICE, "mode", "fast|safe|exact", AT(mode), .choices = modes,
                .help = "how"},
    [F_TAG] = {RO_FLAG_FN, "tag", "TAG", 0, .parse = parse_tag, .help = "a tag (repeatable)"},
    [F_LONG] = {RO_FLAG_STRING, "a-rather-long-flag", "VALUE", AT(long_one),
                .help = "past the column"},
};

static void defaults(cfg_t *c)
{
    memset(c, 0, sizeof *c);
    c->envs = 4;
    c->steps = 7;
    c->timeout = 30.0;
    c->name = "default";
    c->mode = 1;
}

/* parse runs the parser on a NULL-terminated list of arguments after the
 * program name. */
static int parse(cfg_t *c, bool *given, int *operands, char *err, const char *const *args)
{
    static char *argv[32];
    int argc = 0;
    argv[argc++] = "prog";
    for (int i = 0; args[i]; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    return ro__flags_parse(flags, NF, c, given, argc, argv, operands, err, ERRLEN);
}

static void expect_error(const char *const *args, const char *want)
{
    cfg_t c;
    defaults(&c);
    char err[ERRLEN] = "";
    int rc = parse(&c, NULL, NULL, err, args);
    if (rc != RO_EINVAL || strcmp(err, want) != 0)
        fail_msg("expected RO_EINVAL \"%s\"; got %d \"%s\"", want, rc, err);
}

static void test_values_land(void **state)
{
    (void)state;
    cfg_t c;
    defaults(&c);
    bool given[NF];
    memset(given, 1, sizeof given);
    char err[ERRLEN] = "";
    const char *args[] = {"--verbose", "--num-envs", "1024",   "--steps=18446744073709551615",
                          "--timeout", "0.1",        "--name", "x y",
                          "--mode",    "exact",      "--tag",  "a",
                          "--tag=b",   NULL};
    int rc = parse(&c, given, NULL, err, args);
    if (rc)
        fail_msg("%s", err);
    assert_true(c.verbose);
    assert_int_equal(c.envs, 1024);
    assert_true(c.steps == UINT64_MAX);
    assert_true(c.timeout == 0.1);
    assert_string_equal(c.name, "x y");
    assert_int_equal(c.mode, 2);
    assert_int_equal(c.ntags, 2);
    assert_string_equal(c.tags[0], "a");
    assert_string_equal(c.tags[1], "b");
    assert_null(c.long_one); /* not given: untouched */
    for (int i = 0; i < NF; i++)
        assert_int_equal(given[i], i != F_GENERAL && i != F_OUTPUT && i != F_LONG);

    /* Nothing given: the defaults stay, and nothing is marked given. A
     * second parse starts afresh (getopt's state is reset). */
    defaults(&c);
    const char *none[] = {NULL};
    assert_int_equal(parse(&c, given, NULL, err, none), 0);
    assert_false(c.verbose);
    assert_int_equal(c.envs, 4);
    assert_int_equal(c.steps, 7);
    assert_true(c.timeout == 30.0);
    assert_string_equal(c.name, "default");
    assert_int_equal(c.mode, 1);
    for (int i = 0; i < NF; i++)
        assert_false(given[i]);
    /* Bounds are inclusive; 0 seconds is not, below lo. */
    const char *edges[] = {"--num-envs", "1", "--steps", "0", "--timeout", "1000000000", NULL};
    assert_int_equal(parse(&c, NULL, NULL, err, edges), 0);
    assert_int_equal(c.envs, 1);
    assert_int_equal(c.steps, 0);
    assert_true(c.timeout == 1e9);
    /* The last of a repeated flag wins. */
    const char *twice[] = {"--mode", "fast", "--mode", "safe", NULL};
    assert_int_equal(parse(&c, NULL, NULL, err, twice), 0);
    assert_int_equal(c.mode, 1);
}

static void test_operands(void **state)
{
    (void)state;
    cfg_t c;
    defaults(&c);
    char err[ERRLEN] = "";
    int first = -1;
    static char *argv1[] = {"prog", "--num-envs", "2", "in.traj", "out.traj", NULL};
    assert_int_equal(ro__flags_parse(flags, NF, &c, NULL, 5, argv1, &first, err, sizeof err), 0);
    assert_int_equal(first, 3);
    assert_string_equal(argv1[first], "in.traj");
    assert_int_equal(c.envs, 2);
    /* Operands among the flags are moved after them. */
    static char *argv2[] = {"prog", "in.traj", "--verbose", "out.traj", NULL};
    defaults(&c);
    assert_int_equal(ro__flags_parse(flags, NF, &c, NULL, 4, argv2, &first, err, sizeof err), 0);
    assert_true(c.verbose);
    assert_int_equal(first, 2);
    assert_string_equal(argv2[2], "in.traj");
    assert_string_equal(argv2[3], "out.traj");
    /* "--" ends the flags: what follows is an operand, even "--verbose". */
    static char *argv3[] = {"prog", "--", "--verbose", NULL};
    defaults(&c);
    assert_int_equal(ro__flags_parse(flags, NF, &c, NULL, 3, argv3, &first, err, sizeof err), 0);
    assert_false(c.verbose);
    assert_int_equal(first, 2);
    /* None: argc. */
    static char *argv4[] = {"prog", "--verbose", NULL};
    assert_int_equal(ro__flags_parse(flags, NF, &c, NULL, 2, argv4, &first, err, sizeof err), 0);
    assert_int_equal(first, 2);
}

static void test_errors(void **state)
{
    (void)state;
    /* Unknown options, long and short. */
    expect_error((const char *[]){"--bogus", NULL}, "unknown option '--bogus' (see --help)");
    expect_error((const char *[]){"-x", NULL}, "unknown option '-x' (see --help)");
    /* A value missing at the end. */
    expect_error((const char *[]){"--num-envs", NULL}, "--num-envs: missing value (see --help)");
    expect_error((const char *[]){"--verbose", "--name", NULL},
                 "--name: missing value (see --help)");
    /* Bad integers: the whole string, decimal, no sign or blank. */
    const char *bad_ints[] = {"abc", "", "-1", "+5", " 5", "5 ", "5x", "0x10", "1.5", NULL};
    for (int i = 0; bad_ints[i]; i++) {
        char want[ERRLEN];
        snprintf(want, sizeof want, "--num-envs '%s': expected an integer in [1, 1024]",
                 bad_ints[i]);
        expect_error((const char *[]){"--num-envs", bad_ints[i], NULL}, want);
    }
    /* Out of range, at both ends, and past 64 bits. */
    expect_error((const char *[]){"--num-envs", "0", NULL},
                 "--num-envs '0': expected an integer in [1, 1024]");
    expect_error((const char *[]){"--num-envs", "1025", NULL},
                 "--num-envs '1025': expected an integer in [1, 1024]");
    expect_error((const char *[]){"--num-envs", "4294967297", NULL},
                 "--num-envs '4294967297': expected an integer in [1, 1024]");
    expect_error((const char *[]){"--steps", "18446744073709551616", NULL},
                 "--steps '18446744073709551616': expected an integer in [0, "
                 "18446744073709551615]");
    /* Seconds: a finite number >= 0, and >= the flag's own minimum. */
    const char *bad_secs[] = {"abc", "", "-1", "inf", "nan", "1e10", "2s", NULL};
    for (int i = 0; bad_secs[i]; i++) {
        char want[ERRLEN];
        snprintf(want, sizeof want, "--timeout '%s': expected a number of seconds >= 0",
                 bad_secs[i]);
        expect_error((const char *[]){"--timeout", bad_secs[i], NULL}, want);
    }
    expect_error((const char *[]){"--timeout", "0.05", NULL},
                 "--timeout '0.05': expected at least 0.1");
    expect_error((const char *[]){"--timeout", "0", NULL}, "--timeout '0': expected at least 0.1");
    /* An empty string, named by its value name. */
    expect_error((const char *[]){"--name", "", NULL}, "--name '': expected NAME");
    expect_error((const char *[]){"--name=", NULL}, "--name '': expected NAME");
    /* A choice not offered: the message lists them all. */
    expect_error((const char *[]){"--mode", "turbo", NULL},
                 "--mode 'turbo': expected fast, safe or exact");
    expect_error((const char *[]){"--mode", "", NULL}, "--mode '': expected fast, safe or exact");
    expect_error((const char *[]){"--mode", "FAST", NULL},
                 "--mode 'FAST': expected fast, safe or exact");
    /* A custom parser's error passes through. */
    expect_error((const char *[]){"--tag", "a", "--tag", "b", "--tag", "c", "--tag", "d", NULL},
                 "--tag: more than 3 tags");
    /* Operands where none are taken. */
    expect_error((const char *[]){"extra", NULL}, "unexpected argument 'extra' (see --help)");
    expect_error((const char *[]){"--verbose", "a", "b", NULL},
                 "unexpected argument 'a' (see --help)");
    /* The first error is the one reported. */
    expect_error((const char *[]){"--num-envs", "0", "--mode", "x", NULL},
                 "--num-envs '0': expected an integer in [1, 1024]");
}

/* The strict value parsers custom flags use. */
static void test_value_parsers(void **state)
{
    (void)state;
    char err[ERRLEN] = "";
    uint64_t v64 = 0;
    uint32_t v32 = 0;
    double s = -1;
    assert_int_equal(ro__flag_u64("--n", "18446744073709551615", 0, UINT64_MAX, &v64, err, ERRLEN),
                     0);
    assert_true(v64 == UINT64_MAX);
    assert_int_equal(ro__flag_u64("--n", "5", 6, 9, &v64, err, ERRLEN), RO_EINVAL);
    assert_string_equal(err, "--n '5': expected an integer in [6, 9]");
    assert_true(v64 == UINT64_MAX); /* untouched on error */
    assert_int_equal(ro__flag_u32("--k", "4294967295", 0, UINT32_MAX, &v32, err, ERRLEN), 0);
    assert_true(v32 == UINT32_MAX);
    assert_int_equal(ro__flag_u32("--k", "007", 0, 10, &v32, err, ERRLEN), 0);
    assert_int_equal(v32, 7);
    assert_int_equal(ro__flag_u32("--k", "-0", 0, 10, &v32, err, ERRLEN), RO_EINVAL);
    assert_string_equal(err, "--k '-0': expected an integer in [0, 10]");
    assert_int_equal(ro__flag_seconds("--s", "0", &s, err, ERRLEN), 0);
    assert_true(s == 0.0);
    assert_int_equal(ro__flag_seconds("--s", "2.5e1", &s, err, ERRLEN), 0);
    assert_true(s == 25.0);
    assert_int_equal(ro__flag_seconds("--s", "-0.5", &s, err, ERRLEN), RO_EINVAL);
    assert_string_equal(err, "--s '-0.5': expected a number of seconds >= 0");
    assert_true(s == 25.0);
}

/* The help text of each flag starts at column 26 (2 spaces after a longer
 * flag), continuation lines at 26 too; sections are headings. */
static void test_usage(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    ro__flags_usage(f, "usage: prog [FLAGS]\n\n", flags, NF);
    assert_int_equal(fclose(f), 0);
    const char *want = "usage: prog [FLAGS]\n"
                       "\n"
                       "general:\n"
                       "  --verbose               say more\n"
                       "  --num-envs N            envs to run\n"
                       "                          (default 4)\n"
                       "  --steps N               steps\n"
                       "  --timeout S             seconds (>= 0.1)\n"
                       "output:\n"
                       "  --name NAME             a name\n"
                       "  --mode fast|safe|exact  how\n"
                       "  --tag TAG               a tag (repeatable)\n"
                       "  --a-rather-long-flag VALUE  past the column\n";
    if (strcmp(text, want) != 0)
        fail_msg("usage:\n%s\nwanted:\n%s", text, want);
    /* The same rule, line by line: help at column 26 unless the flag is longer. */
    for (char *line = strstr(text, "\n  --"); line; line = strstr(line + 1, "\n  --")) {
        char *help = strstr(line + 3, "  ");
        assert_non_null(help);
        while (*help == ' ')
            help++;
        size_t col = (size_t)(help - (line + 1));
        assert_true(col == 26 || (col > 26 && help[-3] != ' '));
    }
    free(text);
}

/* ro__flags_given answers by name from what the parser saw; a section's
 * heading or an unknown name was never given. */
static void test_given(void **state)
{
    (void)state;
    cfg_t c;
    defaults(&c);
    bool given[NF];
    char err[ERRLEN] = "";
    const char *const args[] = {"--mode", "safe", "--verbose", NULL};
    assert_int_equal(parse(&c, given, NULL, err, args), 0);
    assert_true(ro__flags_given(flags, NF, given, "verbose"));
    assert_true(ro__flags_given(flags, NF, given, "mode"));
    assert_false(ro__flags_given(flags, NF, given, "steps"));
    assert_false(ro__flags_given(flags, NF, given, "output"));
    assert_false(ro__flags_given(flags, NF, given, "no-such-flag"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_land), cmocka_unit_test(test_operands),
        cmocka_unit_test(test_errors),      cmocka_unit_test(test_value_parsers),
        cmocka_unit_test(test_usage),       cmocka_unit_test(test_given),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
