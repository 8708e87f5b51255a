// npm pack's prepack step: copies the protos egress_client.js loads from the repository's
// proto/ into ./proto, so that the package carries them (google/protobuf's come with
// protobufjs).
'use strict';

const fs = require('fs');
const path = require('path');

const from = path.join(__dirname, '..', '..', 'proto');
for (const file of ['egress/v1/egress.proto', 'google/rpc/status.proto',
                    'google/rpc/error_details.proto']) {
  fs.mkdirSync(path.join(__dirname, 'proto', path.dirname(file)), { recursive: true });
  fs.copyFileSync(path.join(from, file), path.join(__dirname, 'proto', file));
}
