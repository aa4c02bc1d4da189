package render

// ChannelsFile is the channels client's shim file, for the external tests.
const ChannelsFile = channelsFile
