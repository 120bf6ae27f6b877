export interface Entity {
  id: string;
  createdAt: Date;
}

export abstract class Repository<T extends Entity> {
  private readonly rows = new Map<string, T>();

  constructor(private readonly name: string) {}

  async save(entity: T): Promise<void> {
    if (this.rows.has(entity.id)) {
      throw new Error(`${this.name}: duplicate ${entity.id}`);
    }
    this.rows.set(entity.id, entity);
  }

  find(id: string): T | undefined {
    return this.rows.get(id);
  }
}

export enum Status {
  Open = "open",
  Closed = "closed",
}

export namespace Queries {
  export function byDate(rows: Entity[],
                         after: Date): Entity[] {
    return rows.filter((row) => {
      const created = row.createdAt;
      return created > after;
    });
  }
}
