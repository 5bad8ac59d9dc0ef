/* The interpreter's count of young objects (young_count.c). The agent's own work puts it back
   as it found it, so that gc.get_count() and the collections it triggers are the program's. */
#ifndef GROWTRACE_YOUNG_COUNT_H
#define GROWTRACE_YOUNG_COUNT_H

int *growtrace_young_count(void);

#endif
