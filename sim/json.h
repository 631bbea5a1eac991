/*
** json.h: the one JSON reading layer of lorasim (scenarios, exec batches,
** compress collections and bundles, cost profiles), over cJSON.
**
** What it adds to cJSON:
**
**  - Duplicate keys are refused at every depth, with the caller's code
**    (`dup`) and the JSON path of the second occurrence: cJSON keeps both
**    copies and its lookups take the first, which silently changes data.
**  - Integers are read exactly.  cJSON stores every number as a double
**    (9007199254740993 becomes ...992); the layer keeps each number's source
**    text (in the node's `valuestring`, pointing into the document's own
**    copy of the text) and lsim_json_int() reads that text, accepting
**    exactly the integers in [-2^63, 2^63-1].  A literal is an integer when
**    its exact decimal value is whole: 1e3, 1000.0 and 10E2 read as 1000;
**    1.5, 1e-1 and 1e400 do not (1e400 is out of range).  -0 reads as 0.
**  - Errors read `FILE: $.a.b[3].c: message` (lsim_json_fail), with the
**    caller's stable code; syntax errors give line and column.
**
** The tree (doc->root) is read-only for callers.  Number nodes carry
** cJSON_IsReference so that cJSON_Delete leaves their text alone; never
** give the tree's nodes to cJSON functions that modify it.
**
** Layering: sim/ (every reader of JSON files lives in sim/); nothing below
** sim/ includes it.
*/
#ifndef LSIM_JSON_H
#define LSIM_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine/lsim.h"
#include "slurp.h"

#define LSIM_JSON_PATHBUF 256 /* a JSON path in a message; longer ends "..." */

/* The codes a caller gives to the failures of the layer itself. */
typedef struct lsim_json_codes {
  lsim_err syntax; /* not JSON, a NUL byte, text after the value, empty */
  lsim_err dup;    /* a key twice in one object */
} lsim_json_codes;

typedef struct lsim_json_doc {
  cJSON *root;      /* read-only tree */
  char *text;       /* private: the number texts point into it */
  size_t len;       /* private */
  const char *name; /* the file name in messages (not owned) */
  char **kept;      /* private: texts of values adopted by lsim_json_set */
  int nkept;        /* private */
} lsim_json_doc;
#define LSIM_JSON_DOC_INIT {NULL, NULL, 0, NULL, NULL, 0}

/* Parse text[0..len) into d (copied; the caller keeps text).  `name` leads
** every message and must outlive d.  On failure d holds nothing. */
lsim_err lsim_json_parse(lsim_json_doc *d, const char *text, size_t len,
                         const char *name, const lsim_json_codes *codes,
                         lsim_errbuf *eb);

/* As lsim_json_parse, taking ownership of `text`, a malloc'd buffer of
** len + 1 bytes (as lsim_slurp gives), also on failure. */
lsim_err lsim_json_parse_owned(lsim_json_doc *d, char *text, size_t len,
                               const char *name, const lsim_json_codes *codes,
                               lsim_errbuf *eb);

/* lsim_slurp(path, opts) then lsim_json_parse_owned, `path` as the name. */
lsim_err lsim_json_load(lsim_json_doc *d, const char *path,
                        const lsim_slurp_opts *opts,
                        const lsim_json_codes *codes, lsim_errbuf *eb);

void lsim_json_release(lsim_json_doc *d);

/* ---- typed reading ------------------------------------------------------ */

typedef enum lsim_json_int_st {
  LSIM_JSON_INT_OK = 0,
  LSIM_JSON_INT_NOT_NUMBER,  /* not a JSON number */
  LSIM_JSON_INT_FRACTION,    /* a number that is not whole */
  LSIM_JSON_INT_RANGE        /* whole, but outside [-2^63, 2^63-1] */
} lsim_json_int_st;

/* The exact integer value of number node v (see the top of this file). */
lsim_json_int_st lsim_json_int(const cJSON *v, int64_t *out);

/* The source text of number node v ("9007199254740993"), or NULL when v is
** not a number of a document parsed here. */
const char *lsim_json_num_text(const cJSON *v);

/* "object", "array", "string", "number", "boolean", "null". */
const char *lsim_json_type_name(const cJSON *v);

/* obj[key] (case-sensitive; keys are unique after parsing) or NULL. */
const cJSON *lsim_json_get(const cJSON *obj, const char *key);

/* Element count of an array or object, walking it once. */
int lsim_json_count(const cJSON *v);

/* parent.key and parent[i] into out[LSIM_JSON_PATHBUF]; control bytes of
** a key are shown as '?', and a path too long ends in "...". */
void lsim_json_key_path(char out[LSIM_JSON_PATHBUF], const char *parent,
                        const char *key);
void lsim_json_idx_path(char out[LSIM_JSON_PATHBUF], const char *parent,
                        int i);

/* Record `FILE: PATH: message` in eb and return code. */
lsim_err lsim_json_fail(lsim_errbuf *eb, lsim_err code, const char *file,
                        const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* A generic typed reader for callers with one code per kind of fault. */
typedef struct lsim_json_rd {
  const char *file;
  lsim_errbuf *eb;
  lsim_err missing, type, range; /* the caller's codes */
} lsim_json_rd;

/* obj[key] as an integer in [lo, hi]: absent is `missing` (required) or
** *out = def; not an integer is `type`; outside [lo, hi] is `range`. */
lsim_err lsim_json_get_int(const lsim_json_rd *r, const cJSON *obj,
                           const char *path, const char *key, int required,
                           int64_t lo, int64_t hi, int64_t def, int64_t *out);

/* ---- editing: `--set JSONPATH=VALUE` ----------------------------------- */

/*
** The one edit of a parsed document, for the command lines' --set (replay,
** compare, sweep; docs/SCENARIO.md "Overrides").  `assign` is
** "PATH=VALUE":
**
**  - PATH is `$` followed by `.key` and `[index]` steps ($.workers.count,
**    $.tenants[1].name); the leading `$.` may be left out.  A key is made
**    of [A-Za-z0-9_-]; an index is a decimal integer.
**  - VALUE is JSON (a number, "a string", an object, an array, true, false,
**    null), read by this layer (exact integers, no duplicate keys).  As a
**    convenience a bare word that is not JSON and starts with a letter, '_'
**    or '/' and holds only [A-Za-z0-9_./:+-] is the string of that word
**    (--set '$.policies.scheduler=fcfs'); anything else that is not JSON
**    is refused, so a number is never read as a string by accident.
**
** The value replaces what PATH holds under `at` (NULL: the root), or is
** added when the last key is missing; missing objects on the way are
** created empty.  An index may name an element or the one past the end
** (appended).  Nothing is checked against any schema here: the caller
** validates the edited tree exactly as it validates a file, so a bad
** value gets the same code and path as in the file.  A PATH that is not
** well formed or cannot be walked (a key under a number, an index into an
** object, an index more than one past the end) and a VALUE that is not
** JSON are LSIM_E_USAGE, naming the --set; a duplicate key inside VALUE
** is codes->dup.  On failure the tree is unchanged.
*/
lsim_err lsim_json_set(lsim_json_doc *d, cJSON *at, const char *assign,
                       const lsim_json_codes *codes, lsim_errbuf *eb);

#endif /* LSIM_JSON_H */
