/*
** sumjson.h: the run's summary as one JSON document (`lorasim replay --json
** PATH`; `lorasim compare` writes one per arm beside its database).
**
** Every figure the console summary prints, under the names the database
** uses: the run (scenario, seed, policies, backend, status, events), every
** runs_summary figure in its order ("summary", null where the figure has
** no value), every tenant_summary row ("tenants": one object per tenant in
** scenario order, then the all-tenants row with "tenant": null and "name":
** "all"), and the files the run wrote.  Keys come out in that fixed order
** (cJSON keeps insertion order), numbers so that they read back as the
** same double.  Written through sim/outfile.c: whole or absent.
** Schema: docs/SCHEMA.md, "The JSON summary".
*/
#ifndef LSIM_SUMJSON_H
#define LSIM_SUMJSON_H

#include "report.h"
#include "scenario.h"
#include "tenants.h"

lsim_err lsim_sumjson_write(const char *path, const lsim_scenario *sc,
                            const lsim_summary *s, lsim_errbuf *eb);

#endif /* LSIM_SUMJSON_H */
