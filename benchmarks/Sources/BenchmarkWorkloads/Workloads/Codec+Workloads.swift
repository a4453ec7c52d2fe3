import Foundation
import KVStore
import Workloads

extension BenchmarkWorkload {
    /// Decoding and encoding one record (each apart; the input and the coder are made in setup): KVStore's
    /// CBOR, Foundation's JSON and the hand-written floor, which setup checks against CBORDecoder and
    /// CBOREncoder.
    static let codec: [BenchmarkWorkload] = [
        BenchmarkWorkload("Decode one DailyRecord", "KVStore CBOR") {
            let bytes = try CBOREncoder().encode(Dataset.sample)
            let decoder = CBORDecoder()
            return { sink(try decoder.decode(DailyRecord.self, from: bytes)) }
        },
        BenchmarkWorkload("Decode one DailyRecord", "JSONDecoder") {
            let data = try JSONEncoder().encode(Dataset.sample)
            let decoder = JSONDecoder()
            return { sink(try decoder.decode(DailyRecord.self, from: data)) }
        },
        BenchmarkWorkload("Decode one DailyRecord", "floor (hand-written)") {
            let bytes = try checkedFloor()
            return { sink(try DailyRecordFloor.decode(bytes)) }
        },
        BenchmarkWorkload("Encode one DailyRecord", "KVStore CBOR") {
            let record = Dataset.sample
            let encoder = CBOREncoder()
            return { sink(try encoder.encode(record)) }
        },
        BenchmarkWorkload("Encode one DailyRecord", "JSONEncoder") {
            let record = Dataset.sample
            let encoder = JSONEncoder()
            return { sink(try encoder.encode(record)) }
        },
        BenchmarkWorkload("Encode one DailyRecord", "floor (hand-written)") {
            let record = Dataset.sample
            _ = try checkedFloor()
            return { sink(try DailyRecordFloor.encode(record)) }
        },
    ]

    /// The sample's CBOR, once the floor has been checked to agree with KVStore's codec on it: the floor
    /// decodes CBOREncoder's bytes to the record, and writes the same bytes, which CBORDecoder reads back.
    private static func checkedFloor() throws -> [UInt8] {
        let record = Dataset.sample
        let bytes = try CBOREncoder().encode(record)
        let decoded = try DailyRecordFloor.decode(bytes)
        precondition(decoded == record, "the floor decoder does not give back the record")
        let floorBytes = try DailyRecordFloor.encode(record)
        let readBack = try CBORDecoder().decode(DailyRecord.self, from: floorBytes)
        precondition(readBack == record, "CBORDecoder does not read the floor encoder's bytes back")
        precondition(floorBytes == bytes, "the floor encoder's bytes differ from CBOREncoder's")
        return bytes
    }
}
