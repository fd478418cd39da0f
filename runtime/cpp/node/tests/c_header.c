/* <seqbus.h> from C99: the header compiles with every warning an error, and the library
 * answers without a bus: a missing configuration is SEQBUS_ERR_CONFIG naming the file. */
#include <seqbus.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  SeqbusNode *node = NULL;
  SeqbusTopic topics[1] = {{7, 1}};
  int32_t rc = seqbus_node_open("/nonexistent/bus.toml", "C", 1, SEQBUS_START_REWIND, topics, 1,
                                NULL, &node);
  if (rc != SEQBUS_ERR_CONFIG || node != NULL) {
    fprintf(stderr, "open: %d (%s), want SEQBUS_ERR_CONFIG\n", rc, seqbus_status_name(rc));
    return 1;
  }
  if (strstr(seqbus_last_error(), "/nonexistent/bus.toml") == NULL) {
    fprintf(stderr, "the message does not name the file: %s\n", seqbus_last_error());
    return 1;
  }
  if (strcmp(seqbus_status_name(SEQBUS_END), "SEQBUS_END") != 0) return 1;
  if (seqbus_node_close(NULL) != SEQBUS_OK) return 1;
  printf("c_header: ok (seqbus-ffi %s)\n", seqbus_version());
  return 0;
}
