package seqbus.node;

/** A message type: IDL schema id and template id. */
public record Topic(int schemaId, int templateId) {
    public Topic {
        if (schemaId < 0 || schemaId > 0xFFFF || templateId < 0 || templateId > 0xFFFF) {
            throw new IllegalArgumentException(
                    "schema and template ids are 0..65535, not " + schemaId + "/" + templateId);
        }
    }
}
