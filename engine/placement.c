/*
** placement.c: the scenario's placement index by name (engine.h, enum
** lsim_placement), over the placement policies' names list of
** policy/registry.c.
*/
#include "engine.h"

#include <string.h>

int lsim_placement_find(const char *name) {
  const char *const *n = lsim_place_names();
  for (int i = 0; name && n[i]; i++)
    if (strcmp(name, n[i]) == 0)
      return i;
  return -1;
}

const char *const *lsim_placement_names(void) { return lsim_place_names(); }
